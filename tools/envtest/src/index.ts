// @cascade/envtest: a real kube-apiserver + etcd for integration tests. See README.md.
export * from './envtest.ts';
