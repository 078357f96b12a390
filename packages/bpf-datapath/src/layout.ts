// `@cascade/bpf-datapath/layout`: the datapath as plain data, for the pure engine (netpolicy's
// engine/): every map's key and value codecs and the Service tables' limits and encoding. Nothing
// here loads a program, opens a map or starts a process (that is the loader's and bpfctl's, in the
// package's main entry).
export * from './codecs.ts';
export * from './services.ts';
