// @cascade/authpolicy: the AuthPolicy kind. See README.md.

// Authorino's AuthConfig CRD as a structural copy that prunes as the real one does (its module is not on the proxy): tests and the e2e
export { authConfigCrd } from './authconfig-crd.ts';
export * from './kind.ts';
export * from './render.ts';
