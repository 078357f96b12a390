// The version of the checkout (the root package.json), for --version and generated files.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The version of the checkout (the root package.json). */
export function version(): string {
  const pkg = JSON.parse(
    readFileSync(join(dirname(fileURLToPath(import.meta.url)), '../../../package.json'), 'utf8'),
  ) as { version: string };
  return pkg.version;
}
