// Runs one suite in this process and prints its figures as one JSON line (for isolated peak RSS).
// Each suite's figures include how fast this machine was when it ran: a fixed integer loop timed
// before and after (this VM's CPU speed varies up to 4x over seconds; read the figures beside it).
const name = process.argv[2];
const speed = () => {
  const t0 = performance.now();
  let x = 0;
  for (let i = 0; i < 1e8; i++) x = (x + i * 7) | 0;
  return { ms: performance.now() - t0, x };
};
const before = speed().ms;
const mod = (await import(`./suites/${name}.ts`)) as { run(): Promise<unknown[]> };
const figures = await mod.run();
const after = speed().ms;
const input = 'a 100,000,000-step integer loop, before / after the suite (lower is faster)';
figures.push(
  { suite: name, name: 'machine speed before the suite', value: before, unit: 'ms', input },
  { suite: name, name: 'machine speed after the suite', value: after, unit: 'ms', input },
);
process.stdout.write(`${JSON.stringify(figures)}\n`);
