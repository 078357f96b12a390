// Gateway API manifests -> core topology objects: the conversion lives in @cascade/core (the
// controllers use it too).
export { type Converted, convertTopology } from '@cascade/core';
