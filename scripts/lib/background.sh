# Sourced by the set-up steps that start a first build nobody needs until well into npm test.
# in_background LOG CMD...: runs CMD detached (its own session: it outlives the step), at the lowest
# CPU and I/O priority so that it uses what the tests leave idle, its output in LOG; prints its pid.
# Whoever needs the build waits on the lock the build script holds.
in_background() {
  local out=$1
  shift
  mkdir -p "$(dirname "$out")"
  local lowest=(nice -n 19)
  command -v ionice >/dev/null && lowest+=(ionice -c 3)
  setsid "${lowest[@]}" "$@" </dev/null >"$out" 2>&1 &
  echo $!
}
