#!/usr/bin/env bash
# Runs one type check of the workspace, then lint and test of every project through nx, then prints one
# closing line 'N passed, N failed' summed over all vitest result files.
#
# The cluster end-to-end suite (tools/cluster's tests) is the long pole: about 13-14 minutes on a
# 2-core machine, much of it waiting for a cluster to converge (it slows beside other work). It
# starts first, straight from vitest (the `build` targets are type checks that write nothing, so it
# needs none of them), and every other target runs beside it, one at a time so that the e2e's timed
# steps keep a core: one type check of the workspace, then each project's lint and test through nx.
# With arguments (`npm test -- --projects=...`) everything goes through nx as given.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false
# The Go programs the tests run (kubectl about 860 times, helm, ctr, the upstream suites, and the test
# cluster's daemons: kube-apiserver, etcd, containerd, kubelet...) collect garbage at 5x their live
# heap instead of 2x: measured, `kubectl version --client` costs 25 ms of CPU instead of 36, and the
# run's kubectl calls 30 s instead of 41. envtest's servers set their own (tools/envtest: GOGC=1000
# with a 2 GiB limit). A GOGC given to npm test is kept.
export GOGC=${GOGC:-400}
# Every Node process of the run (about 13 vitest processes, nx's, the controllers and agents the
# integration tests start, the CLI, the cluster's tool) keeps what V8 compiled in one cache, so a
# module compiled once is not compiled again by the next process: measured, the netpolicy package's
# tests took 9 s less CPU (79 -> 70 s) with the cache warm. The clone's own, so a new clone starts empty.
export NODE_COMPILE_CACHE=${NODE_COMPILE_CACHE:-$root/node_modules/.cache/node-compile}
rm -f packages/*/.vitest-results*.json tools/*/.vitest-results*.json
# the test phase's start and its own steps' seconds, for the phase report (scripts/test-summary.ts)
export CASCADE_TEST_T0=$(date +%s)
times=node_modules/.cascade-test-times
: > "$times"
# In CI every target runs for real: a result restored from a cache would prove nothing.
skip_cache=()
[[ ${CI:-} == true ]] && skip_cache=(--skip-nx-cache)
if (($#)); then
  npx nx run-many -t build lint test --outputStyle=stream "${skip_cache[@]}" "$@"
  status=$?
else
  e2e=@cascade/cluster
  # cluster_vitest ARG...: the command nx would run for the project's test target, with ARG..., its
  # lines labelled as nx labels them
  cluster_vitest() {
    (
      cd tools/cluster || exit 1
      PATH="$root/node_modules/.bin:$PATH" vitest run "$@" 2>&1 | sed -u "s|^|$e2e: |"
      exit "${PIPESTATUS[0]}"
    )
  }
  # its end-to-end files only (*.cluster.test.ts) first: its other files (the chart's, about 20 s)
  # would delay the first cluster; they run in the other lane, after nx, into a result file of their own
  cluster_vitest .cluster.test.ts &
  e2e_pid=$!
  # One type check of the whole workspace (tsconfig.json: every project's sources in one program,
  # about 30 s of CPU) instead of each project's `build`: `tsc -p` of a project checks the sources of
  # every project it imports again (core ten times), about 200 s of CPU in all beside the e2e. The
  # nx targets then run without their `build` dependencies.
  echo "> tsc -p tsconfig.json (every project, once)"
  t0=$SECONDS
  node_modules/.bin/tsc -p tsconfig.json
  status=$?
  echo "typecheck $((SECONDS - t0))" >> "$times"
  npx nx run-many -t lint test --exclude="$e2e" --parallel=1 --excludeTaskDependencies --outputStyle=stream "${skip_cache[@]}" || status=1
  npx nx run-many -t lint --projects="$e2e" --excludeTaskDependencies --outputStyle=stream "${skip_cache[@]}" || status=1
  cluster_vitest --exclude 'src/**/*.cluster.test.ts' --outputFile.json=.vitest-results.unit.json || status=1
  wait "$e2e_pid" || status=1
fi
node scripts/test-summary.ts || status=1
exit $status
