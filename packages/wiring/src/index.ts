// @cascade/wiring: the gateway-wiring controller's binary (the gateway policy kinds it wires, its
// flags). The controller itself is kind-agnostic and lives in @cascade/core (runtime/wiring-controller).
export { GATEWAY_POLICY_KINDS, wiringFlags } from './flags.ts';
