#!/usr/bin/env bash
# A headless browser (Debian's chromium) for the test that looks at cascadectl's SVG pictures the
# way a user would. Installed once; nothing to build.
set -euo pipefail
log() { printf '[setup:chromium] %s\n' "$*" >&2; }
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then log "chromium missing and not root: cannot install"; exit 0; fi
log "installing chromium (headless screenshots of the SVG pictures)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
