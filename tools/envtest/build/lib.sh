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
