// @cascade/authpolicy: the AuthPolicy kind. See README.md.

// Authorino's AuthConfig CRD stand-in, for tests and the e2e (Authorino's module is not on the proxy)
export { authConfigStandInCrd } from './authconfig-crd.ts';
export * from './kind.ts';
export * from './render.ts';
