#!/usr/bin/env bash
# cascadectl's bundle (packages/cascadectl/dist): what bin/cascadectl.js runs so that a command starts in
# a fraction of the time the TypeScript sources take to load. Rebuilt only when a source changed; the
# shim checks the same thing at start and runs the sources when the bundle is older than them.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cli="$root/packages/cascadectl"
log() { printf '[setup:cli] %s\n' "$*" >&2; }
sum=$(cd "$root" && find packages/cascadectl/src packages/*/src -name '*.ts' ! -name '*.test.ts' -print0 2>/dev/null |
  sort -z | xargs -0 cat packages/cascadectl/rolldown.config.mjs package-lock.json | sha256sum | cut -c1-16)
stamp="$cli/dist/.stamp"
if [[ -f $stamp && $(cat "$stamp") == "$sum" && -f $cli/dist/cascadectl.mjs ]]; then
  log "cascadectl bundle up to date"
  touch "$cli/dist/cascadectl.mjs" # sources touched but unchanged: the shim compares times
  exit 0
fi
log "bundling cascadectl (rolldown)"
rm -rf "$cli/dist"
(cd "$cli" && "$root/node_modules/.bin/rolldown" -c rolldown.config.mjs --logLevel silent >/dev/null)
echo "$sum" > "$stamp"
