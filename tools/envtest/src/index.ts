// @cascade/envtest: a real kube-apiserver + etcd for integration tests. See README.md.

// field paths of CRD schemas, to compare the project's zod schemas with the upstream CRDs
export {
  requiredPaths,
  type SchemaNode,
  schemaPaths,
  upstreamSpecPaths,
  upstreamSpecRequired,
} from './crd-paths.ts';
// the API server and etcd on loopback, the providers' CRDs, and CI's rule that missing is a failure
export {
  apiServerTestsEnabled,
  Envtest,
  envtestPaths,
  olderCrdDir,
  providerCrds,
  waitFor,
} from './envtest.ts';
