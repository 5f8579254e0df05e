#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-subproject.sh - libaioloop as a meson subproject of a parent
# project (docs/subproject.md).  Lays out, in a temporary directory, the
# parent of this directory's meson.build with the use-*.c programs of
# tests/install, docs/examples/aioloop.wrap as subprojects/aioloop.wrap and
# this tree's tracked files (as they are in the working tree) as
# subprojects/aioloop; configures it with no -D flags behind a pkg-config
# that knows no cmocka and no installed libaioloop; builds it and runs
# each program.  Fails when the configure log mentions cmocka, when any
# target of ours is more than a static library or one of ours is to be
# installed, when the parent has tests or benchmarks of ours, or when
# `meson install --destdir` installs anything but the parent's programs.
set -euo pipefail

# (the tree is a git checkout: its tracked files are what gets copied)
repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
here=$repo/tests/subproject
tmp=$(mktemp -d /tmp/aiol-subproject-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
parent=$tmp/parent
sub=$parent/subprojects/aioloop
fail() { echo "check-subproject: $*"; exit 1; }

mkdir -p "$sub" "$tmp/bin"
cp "$here/meson.build" "$repo"/tests/install/use-*.c "$parent/"
cp "$repo/docs/examples/aioloop.wrap" "$parent/subprojects/"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard) |
    while IFS= read -r -d '' f; do
        [ -f "$repo/$f" ] || continue     # tracked, deleted in the tree
        mkdir -p "$sub/$(dirname "$f")"
        cp -p "$repo/$f" "$sub/$f"
    done
[ -f "$sub/meson.build" ] || fail "copying the tree to $sub failed"

# pkg-config without cmocka (a machine that has none) and without any
# installed libaioloop (the parent must get ours, not the system's)
real_pc=$(command -v pkg-config) || fail "pkg-config missing"
cat > "$tmp/bin/pkg-config" <<WRAP
#!/bin/sh
for a in "\$@"; do
    case \$a in cmocka*|aioloop*) exit 1 ;; esac
done
exec "$real_pc" "\$@"
WRAP
chmod +x "$tmp/bin/pkg-config"
export PATH=$tmp/bin:$PATH PKG_CONFIG=$tmp/bin/pkg-config

echo "check-subproject: configuring $parent (no -D flags, no cmocka)"
meson setup "$tmp/build" "$parent" > "$tmp/setup.log" 2>&1 ||
    { cat "$tmp/setup.log"; fail "the parent does not configure"; }
log=$tmp/build/meson-logs/meson-log.txt
if grep -i cmocka "$log"; then
    fail "the configure log mentions cmocka (above)"
fi
ninja -C "$tmp/build" -j2 > "$tmp/build.log" 2>&1 ||
    { tail -30 "$tmp/build.log"; fail "the parent does not build"; }
n=0
for exe in "$tmp"/build/use-*; do
    [ -x "$exe" ] && [ -f "$exe" ] || continue
    "$exe" || fail "$(basename "$exe") failed"
    n=$((n + 1))
done
[ "$n" -eq 5 ] || fail "built $n of the parent's 5 programs"

# Our targets: static libraries only, none installed; no tests, no
# benchmarks
meson introspect "$tmp/build" --targets --tests --benchmarks > "$tmp/intro.json"
/usr/bin/python3 - "$tmp/intro.json" <<'PY' || fail "the subproject builds more than its libraries"
import json, sys
intro = json.load(open(sys.argv[1]))
ours = [t for t in intro["targets"] if t["subproject"] == "aioloop"]
bad = ["%s (%s%s)" % (t["name"], t["type"], ", installed" if t["installed"] else "")
       for t in ours if t["type"] != "static library" or t["installed"]]
libs = sorted(t["name"] for t in ours if t["type"] == "static library")
print("check-subproject: our targets: %s" % " ".join(libs))
for what in ("tests", "benchmarks"):
    bad += ["%s %s" % (what[:-1], t["name"]) for t in intro[what]]
if bad or not libs:
    print("check-subproject: not wanted: %s" % ", ".join(bad or ["(no library)"]))
    sys.exit(1)
PY

meson install -C "$tmp/build" --destdir "$tmp/dest" --quiet > "$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "meson install failed"; }
installed=$(cd "$tmp/dest" && find . ! -type d | sort)
others=$(printf '%s\n' "$installed" | grep -v '/bin/use-aioloop[a-z-]*$' || true)
[ -z "$others" ] || fail "installs what the parent did not ask for:
$others"
[ "$(printf '%s\n' "$installed" | wc -l)" -eq 5 ] ||
    fail "installs $(printf '%s\n' "$installed" | wc -l) files, not the parent's 5 programs"
echo "check-subproject: 5 programs built with libaioloop as a subproject and ran; only they are installed"
