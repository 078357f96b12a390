// @cascade/envtest: a real kube-apiserver + etcd for integration tests. See README.md.

export * from './crd-paths.ts';
export * from './envtest.ts';
