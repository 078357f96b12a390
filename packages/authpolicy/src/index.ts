// @cascade/authpolicy: the AuthPolicy kind. See README.md.
export * from './kind.ts';
