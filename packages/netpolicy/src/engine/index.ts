// The engine: network policy resolution, pure. Plain data in (namespaces, nodes, pods, the four policy
// kinds, Services), plain data out (identities, ordered rules, MapState entries, verdicts, lint and
// dead-rule findings, namespace budgets). No I/O: the CLI, the agent, the controller and the benchmarks
// run this same code. Imports neither agent/ nor controller/ nor cluster/ (checked by test/rooms.test.ts).
export * from './budget.ts';
export * from './cidr.ts';
export * from './dead-rules.ts';
export * from './engine.ts';
export * from './evaluate.ts';
export * from './identities.ts';
export * from './identity-cap.ts';
export * from './lint.ts';
export * from './lower.ts';
export * from './mapstate.ts';
export * from './model.ts';
export * from './ports.ts';
export * from './precedence.ts';
export * from './rules.ts';
export * from './selection.ts';
export * from './service-budget.ts';
export * from './services.ts';
export * from './tenants.ts';
export * from './tiers.ts';
export * from './verdict.ts';
