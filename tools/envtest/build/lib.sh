# Sourced by the Go build scripts (tools/envtest/build/kube-set.sh, tools/cluster/build/flannel.sh and
# kube-network-policies.sh, tools/conformance/build/build.sh): how a binary is built from a Go module
# here: a throwaway module in SRC that requires it, a tools.go that imports the commands, `go mod
# tidy`, then `go build`.

# go_build_setup TAG OUT WHAT...: go on PATH (or a clear error naming what needed it), OUT/bin and
# OUT/src made, and the environment every Go build here uses (module mode, no toolchain download,
# static, no DWARF). The binaries are linked with -s -w, which drops the debug information, but the
# compiler still writes it for every package unless told not to: -dwarf=false takes about 13% off a
# fresh machine's compile time (client-go and the API server's packages from an empty build cache:
# 272 s of CPU against 238), and the binaries are the same programs (stack traces come from the
# runtime's own tables, not DWARF). Go applies each GOFLAGS entry only to commands that know it.
go_build_setup() {
  local tag=$1 out=$2
  shift 2
  [[ -x /usr/local/go/bin/go ]] && export PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null || { echo "$tag: go is required to build $*" >&2; exit 1; }
  mkdir -p "$out/bin" "$out/src"
  export GOFLAGS='-mod=mod -gcflags=all=-dwarf=false' GOTOOLCHAIN=local CGO_ENABLED=0
}

# k8s_module SRC NAME VERSION: SRC/go.mod requiring k8s.io/kubernetes@VERSION. Every staging module
# that k8s.io/kubernetes replaces with ./staging/... comes from its own module at the matching v0.x.
k8s_module() {
  local src=$1 name=$2 version=$3 gomod
  mkdir -p "$src"
  gomod=$(cd "$src" && go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module cascade.dev/$name"
    echo "go 1.24"
    echo "require k8s.io/kubernetes $version"
    sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => ./staging/src/.*#replace \1 => \1 '"v0${version#v1}"'#p' "$gomod"
  } > "$src/go.mod"
}

# k8s_ldflags VERSION: the version a Kubernetes binary reports (clients such as helm check it)
k8s_ldflags() {
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$1 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$1" | cut -d. -f2)"
}

# tool_module SRC NAME [MODULE VERSION]: SRC/go.mod (requiring MODULE@VERSION when given) and a
# tools.go importing the packages read from stdin, one per line; then `go mod tidy`
tool_module() {
  local src=$1 name=$2
  mkdir -p "$src"
  if (($# >= 4)); then
    printf 'module cascade.dev/%s\ngo 1.24\nrequire %s %s\n' "$name" "$3" "$4" > "$src/go.mod"
  fi
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    while read -r pkg; do printf '\t_ "%s"\n' "$pkg"; done
    printf ')\n'
  } > "$src/tools.go"
  (cd "$src" && { go mod tidy -e >/dev/null 2>&1 || true; })
}

# kube_set_list SRC: the Kubernetes build set's build list (kube-set.sh --module resolves the set's
# module without building it) into SRC/.kube-set-list, a module per line: its path and version, then
# the path and version it is replaced with, if it is. align_to_kube_set, kube_set_version and
# kube_set_differences read it.
kube_set_list() {
  (cd "$(bash "${BASH_SOURCE[0]%/*}/kube-set.sh" --module)" &&
    go list -mod=readonly -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{with .Replace}} {{.Path}} {{.Version}}{{end}}{{end}}' all) \
    > "$1/.kube-set-list"
}

# kube_set_version SRC MODULE: the version of MODULE the build set selects (after kube_set_list SRC)
kube_set_version() {
  awk -v m="$2" '$1 == m { print $2 }' "$1/.kube-set-list"
}

# align_to_kube_set SRC: a Go tool built beside the Kubernetes build set (kube-set.sh), in the module
# SRC, compiles what it shares with the set only once if it selects the set's versions of it: Go keys
# a compiled package by its module's selected version, so client-go one patch release apart is
# compiled again, with everything above it. SRC/go.mod gets the set's whole build list as
# requirements and the set's replaces (Kubernetes' staging modules at the set's version). Minimal
# version selection then keeps the set's versions wherever the tool asks for older ones, and the
# tool's wherever it asks for newer: nothing the tool requires is ever lowered, so only a tool whose
# Kubernetes libraries are no newer than the set's is worth aligning (the callers check that).
# Run it after kube_set_list SRC and before tool_module's tidy; kube_set_differences afterwards names
# what still differs.
align_to_kube_set() {
  local src=$1 args
  mapfile -t args < <(awk '{ print "-require=" $1 "@" $2 } NF == 4 { print "-replace=" $1 "=" $3 "@" $4 }' "$src/.kube-set-list")
  (cd "$src" && go mod edit "${args[@]}")
}

# kube_set_differences SRC PACKAGE...: the modules of PACKAGE...'s build (with their tests) that SRC
# selects at another version than the build set (after align_to_kube_set and a tidy), each as
# "path set-version -> version": none when every shared module agrees
kube_set_differences() {
  local src=$1
  shift
  awk 'FNR == NR { v[$1] = $2; next } ($1 in v) && v[$1] != $2 { print $1 " " v[$1] " -> " $2 }' "$src/.kube-set-list" \
    <(cd "$src" && go list -mod=readonly -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' "$@" | sort -u)
}
