// Runs one suite in this process and prints its figures as one JSON line (for isolated peak RSS).
const name = process.argv[2];
const mod = (await import(`./suites/${name}.ts`)) as { run(): Promise<unknown[]> };
const figures = await mod.run();
process.stdout.write(`${JSON.stringify(figures)}\n`);
