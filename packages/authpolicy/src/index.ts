// @cascade/authpolicy: the AuthPolicy kind. See README.md.
export * from './kind.ts';
export * from './render.ts';
