#!/usr/bin/env bash
# The cluster harness is TypeScript (src/cluster/main.ts); this is its entry point for scripts.
#   npm run cluster -- up [--nodes N] [--no-cascade] | down | status | install [TAG [TIMEOUT]]
#                    | node stop|start NAME | import ARCHIVE... | env
root=$(cd "$(dirname "$0")/../.." && pwd)
exec "$root/node_modules/.bin/node" "$root/tools/cluster/src/cluster/main.ts" "$@"
