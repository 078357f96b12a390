// @cascade/authpolicy: the AuthPolicy kind (its schema and what it renders for Authorino and the
// gateway's data plane), and the structural AuthConfig CRD its tests write against. See README.md.
export { authConfigCrd } from './authconfig-crd.ts';
export { authPolicyKind } from './kind.ts';
