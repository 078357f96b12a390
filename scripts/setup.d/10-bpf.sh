#!/usr/bin/env bash
# BPF toolchain (clang, bpftool, libbpf from Debian) and the datapath build: the BPF object and the
# libbpf helper. Rebuilt only when their sources change; bpffs mounted when missing (root only).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
pkg="$root/packages/bpf-datapath"
log() { printf '[setup:bpf] %s\n' "$*" >&2; }
need=()
command -v clang >/dev/null || need+=(clang llvm)
command -v bpftool >/dev/null || need+=(bpftool)
[[ -f /usr/include/bpf/libbpf.h ]] || need+=(libbpf-dev)
# the static cascade-cni links libelf and zlib's static archives
[[ -f /usr/lib/x86_64-linux-gnu/libelf.a || -f /usr/lib/$(gcc -dumpmachine 2>/dev/null)/libelf.a ]] || need+=(libelf-dev)
[[ -f /usr/lib/x86_64-linux-gnu/libz.a || -f /usr/lib/$(gcc -dumpmachine 2>/dev/null)/libz.a ]] || need+=(zlib1g-dev)
command -v gcc >/dev/null || need+=(gcc)
command -v ip >/dev/null || need+=(iproute2)  # netns/veth for the attachment test
[[ -f /usr/include/x86_64-linux-gnu/asm/types.h || -f /usr/include/asm/types.h ]] || need+=(linux-libc-dev)
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then log "missing ${need[*]} and not root: cannot install"; exit 0; fi
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
stamp="$pkg/build/.stamp"
sum=$(cat "$pkg"/bpf/*.c "$pkg"/bpf/*.h "$pkg"/native/*.c "$pkg"/native/*.h "$0" | sha256sum | cut -c1-16)
if [[ -f $stamp && $(cat "$stamp") == "$sum" && -f $pkg/build/cascade.bpf.o && -f $pkg/build/cascade-bench-cold.bpf.o && -x $pkg/build/cascade-bpfctl && -x $pkg/build/cascade-cni ]]; then
  log "datapath build up to date"
else
  mkdir -p "$pkg/build"
  arch_inc="/usr/include/$(gcc -dumpmachine)"
  log "compiling the BPF program (clang -target bpf, BTF on)"
  clang -O2 -g -Wall -target bpf -I"$arch_inc" -c "$pkg/bpf/cascade.bpf.c" -o "$pkg/build/cascade.bpf.o"
  # bench-only builds of the same source (npm run bench): every repeat a new flow; and cold verdicts
  clang -O2 -g -Wall -target bpf -I"$arch_inc" -DCASCADE_BENCH_NEW_FLOWS -c "$pkg/bpf/cascade.bpf.c" -o "$pkg/build/cascade-bench-new-flows.bpf.o"
  clang -O2 -g -Wall -target bpf -I"$arch_inc" -DCASCADE_BENCH_NEW_FLOWS -DCASCADE_BENCH_COLD -c "$pkg/bpf/cascade.bpf.c" -o "$pkg/build/cascade-bench-cold.bpf.o"
  log "compiling the libbpf helper"
  gcc -O2 -Wall -o "$pkg/build/cascade-bpfctl" "$pkg/native/bpfctl.c" "$pkg/native/ct.c" -lbpf
  log "compiling the CNI chaining plugin"
  # static: the agent's init container copies it onto nodes whatever libbpf (if any) they have
  gcc -O2 -Wall -static -o "$pkg/build/cascade-cni" "$pkg/native/cni.c" -lbpf -lelf -lz
  echo "$sum" > "$stamp"
fi
if [[ $(id -u) -eq 0 ]] && ! mountpoint -q /sys/fs/bpf 2>/dev/null; then
  mount -t bpf bpf /sys/fs/bpf 2>/dev/null && log "mounted bpffs on /sys/fs/bpf" || log "could not mount bpffs"
fi
