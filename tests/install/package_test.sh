#!/usr/bin/env bash
# The install and the Debian package, end to end: `cmake --install` into a
# scratch prefix that is then moved (the bundled model must be found beside
# the binary, not in the source tree), and the .deb that CPack builds,
# unpacked into a scratch root and run there.
#   package_test.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

check_runs() {  # a lily binary and the prefix its model must come from
  local lily="$1" prefix="$2"
  "$lily" --version | grep -Eq '^lily [0-9]+\.[0-9]+\.[0-9]+ \(commit [^)]+\)$' || fail "$lily --version: $("$lily" --version)"
  # From elsewhere, with no model named: the bundled one, installed beside the binary.
  local info
  info="$(cd / && env -u LILY_MODEL "$lily" info)"
  grep -q "^model: *$prefix/share/lily/models/lily-tiny$" <<<"$info" || fail "the bundled model was not found in $prefix: $info"
  local out
  out="$(cd / && env -u LILY_MODEL "$lily" run "hello" --max-tokens 8 --seed 1 2>&1)" || fail "lily run: $out"
  grep -Eq "generation: [0-9]+ tokens" <<<"$out" || fail "lily run gave no answer: $out"
}

# 1. cmake --install, then the prefix moved elsewhere.
cmake --install "$build" --prefix "$work/prefix" >/dev/null
mv "$work/prefix" "$work/moved"
[ -x "$work/moved/bin/lily" ] || fail "no bin/lily in the install"
[ -f "$work/moved/share/lily/models/lily-tiny/model.safetensors" ] || fail "no bundled model in the install"
check_runs "$work/moved/bin/lily" "$work/moved"
echo "ok: cmake --install, prefix moved"

# 2. The Debian package.
(cd "$build" && cpack -G DEB -B "$work/deb" >/dev/null)
deb="$(ls "$work"/deb/lily_*.deb)"
fields="$(dpkg-deb -f "$deb" Package Version Architecture Depends)"
grep -q '^Package: lily$' <<<"$fields" || fail "package name: $fields"
grep -q '^Depends: .*libc6' <<<"$fields" || fail "no Depends worked out from the binary: $fields"
files="$(dpkg-deb -c "$deb")"
for f in ./usr/bin/lily ./usr/share/lily/models/lily-tiny/model.safetensors ./usr/share/lily/models/lily-tiny/tokenizer.json; do
  grep -q " $f\$" <<<"$files" || fail "$f is not in the package"
done
# Every dependency resolves against the system's package lists (apt's simulation needs no root).
if command -v apt-get >/dev/null; then
  apt-get install -s "$deb" >"$work/apt.log" 2>&1 || fail "apt cannot install the package: $(tail -5 "$work/apt.log")"
fi
dpkg -x "$deb" "$work/root"
check_runs "$work/root/usr/bin/lily" "$work/root/usr"
echo "ok: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB) installs into a scratch root and runs"
