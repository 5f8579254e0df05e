#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build.sh [--stock|--fork|--fork-disabled|--both]
#          [--tests-only|--all] [--check-series] [WORKDIR]
#
# Builds Debian's QEMU 10.2.2 source (sid's qemu 1:10.2.2+ds-1, fetched
# through a private apt configuration by fetch-source.sh) from one unpacked
# tree; its meson (>= 1.5) comes from bookworm-backports into
# WORKDIR/tools (fetch-tool.sh).  The series is patches/.  (The 7.2
# series and this script's 7.2 support are at the git tag
# qemu-7.2-series.)
#   --stock  WORKDIR/stock-src -> WORKDIR/stock-build   (no series)
#   --fork   WORKDIR/fork-src  -> WORKDIR/fork-build    (the series applied,
#            linked against libaioloop from this tree)
#   --fork-disabled  WORKDIR/fork-src -> WORKDIR/fork-disabled-build: the
#            series configured with --disable-aioloop, which builds QEMU's
#            own aio-posix.c and timer lists and needs no libaioloop
#   --both   stock and fork (the default)
# What is built:
#   --tests-only  what `meson test --suite unit` needs, and nothing else (default)
#   --all         that, plus qemu-system-x86_64, qemu-img, qemu-io, qemu-nbd,
#                 qemu-storage-daemon (qemu-iotests need them) and the
#                 qtest binary qos-test (qtest.sh runs it)
#   --check-series  then check out each patch of the series in turn (the
#                 Debian base plus patches 1..k) and build the same
#                 targets there: every patch must build on its own.
#                 The tree is left at the whole series.
# WORKDIR defaults to <repo>/build-qemu10 (git-ignored by /build-*/).
#
# Steps: install missing Debian build dependencies (as root), fetch and
# unpack the source (fetch-source.sh), copy it per variant; for the fork,
# commit the copy to git and apply the series with `git am`, and build and
# install this tree's libaioloop where pkg-config finds it; configure once,
# build incrementally.  A second run reuses the
# unpacked, patched and configured trees and only runs ninja.  Run the tests
# with run-tests.sh.
#
# Environment: JOBS (ninja -j, default: nproc), NICE (default 10).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

variants=()
what=tests
check_series=false
work=
for arg in "$@"; do
    case $arg in
        --stock) variants+=(stock) ;;
        --fork) variants+=(fork) ;;
        --fork-disabled) variants+=(fork-disabled) ;;
        --both) variants+=(stock fork) ;;
        --tests-only) what=tests ;;
        --all) what=all ;;
        --check-series) check_series=true ;;
        -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        -*) echo "build.sh: unknown option $arg" >&2; exit 2 ;;
        *) [ -z "$work" ] || { echo "build.sh: one WORKDIR only" >&2; exit 2; }
           work=$arg ;;
    esac
done
patches_dir=$here/patches
[ ${#variants[@]} -gt 0 ] || variants=(stock fork)
if $check_series && [[ " ${variants[*]} " != *" fork "* ]]; then
    variants+=(fork)
fi
work=$(realpath -m "${work:-$repo/build-qemu10}")
jobs=${JOBS:-$(nproc)}
nice_cmd=(nice -n "${NICE:-10}")

# ---------------------------------------------------------------------------
# 1. Debian build dependencies of this configuration (and of fetch-source.sh).
# QEMU's +ds tarball bundles neither meson (fetch-tool.sh brings a new
# enough one) nor dtc, which comes from Debian: x86_64-softmmu needs libfdt
# (TARGET_NEED_FDT); aio=native (which guest-test.sh runs) needs libaio;
# configure makes a Python venv (python3-venv).  The meson from Debian
# builds this tree's libaioloop.  The last line is optional for the build
# but pins the unit-test set: with gnutls+tasn1 the TLS/crypto tests are
# built.  socat is left out: without it test-io-channel-command skips
# itself.
QEMU_DEB_PKGS="gcc make git pkg-config python3 python3-venv meson ninja-build \
dpkg-dev debian-archive-keyring libglib2.0-dev libpixman-1-dev zlib1g-dev \
libfdt-dev liburing-dev libaio-dev \
libgnutls28-dev libtasn1-6-dev"

t_start=$(date +%s)
stamp() { echo "build.sh: [$(( $(date +%s) - t_start ))s] $*"; }

. "$here/pkgs.sh"
# shellcheck disable=SC2086  # one word per package
pkgs_install build.sh $QEMU_DEB_PKGS

# ---------------------------------------------------------------------------
# 2. Source, and its meson.
t0=$(date +%s)
"$here/fetch-source.sh" "$work" "qemu=1:10.2.2+ds-1" sid
mapfile -t tool_dirs < <("$here/fetch-tool.sh" "$work" meson bookworm-backports)
# (configure makes a venv again each time: it finds this meson there
# through PYTHONPATH, and ninja's regeneration through PATH)
export PATH="${tool_dirs[0]}:$PATH"
export PYTHONPATH="${tool_dirs[1]}${PYTHONPATH:+:$PYTHONPATH}"
stamp "fetch: $(( $(date +%s) - t0 ))s"

configure_flags=(
    --target-list=x86_64-softmmu
    --disable-docs --disable-werror --enable-linux-io-uring --enable-linux-aio
    --disable-install-blobs
    --disable-gtk --disable-sdl --disable-vnc --disable-spice --disable-opengl
    --disable-curses --disable-slirp --disable-capstone
    # as debian/rules configures it: Debian's python, nothing downloaded
    --python=/usr/bin/python3 --disable-download
)

# The series: patch file names in order, '#' comments and blank lines skipped.
series_patches() {
    local f=$patches_dir/series line
    [ -f "$f" ] || return 0
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line%%#*}
        line=${line#"${line%%[![:space:]]*}"}
        line=${line%"${line##*[![:space:]]}"}
        [ -z "$line" ] || echo "$patches_dir/$line"
    done < "$f"
}

# Copy WORKDIR/src to $1 once (through a temporary name, so an interrupted
# copy is never taken for a finished one).
copy_src() {
    local dst=$1 mode=$2
    [ -f "$dst/.copied" ] && return 0
    rm -rf "$dst" "$dst.tmp"
    stamp "copying src to $dst"
    cp "$mode" "$work/src" "$dst.tmp"
    cat "$work/src/.unpacked" > "$dst.tmp/.copied"
    mv "$dst.tmp" "$dst"
}

# Who the base commit and the applied patches are committed as (each patch
# keeps its own author and Signed-off-by).
export GIT_COMMITTER_NAME="libaioloop maintainers"
export GIT_COMMITTER_EMAIL="maintainers@users.noreply.a-seed-19aa71c1.example"
export GIT_AUTHOR_NAME=$GIT_COMMITTER_NAME GIT_AUTHOR_EMAIL=$GIT_COMMITTER_EMAIL

# fork-src: a git tree of the unpacked Debian source (one base commit,
# tagged debian) with the series applied by `git am`, one commit per patch.
# The applied state is kept in fork-src/.series-applied (a checksum of the
# series and every patch).  If it changed, the tree is reset to the base
# and the series applied again; git rewrites only the files that differ,
# so ninja rebuilds only what the change touched.
prepare_fork_src() {
    local dst=$work/fork-src patches sum
    mapfile -t patches < <(series_patches)
    sum=$(cat "$patches_dir/series" "${patches[@]}" 2>/dev/null | sha256sum | cut -d' ' -f1)
    if [ -f "$dst/.series-applied" ] && [ "$(cat "$dst/.series-applied")" = "$sum" ]; then
        echo "build.sh: fork-src: series already applied (${#patches[@]} patches)"
        return 0
    fi
    if [ ! -d "$dst/.git" ] || ! git -C "$dst" rev-parse -q --verify debian >/dev/null; then
        rm -rf "$dst"
        copy_src "$dst" -a
        stamp "fork-src: base commit of the Debian source"
        git -C "$dst" init -q
        printf '%s\n' .pc/ .copied .unpacked .series-applied > "$dst/.git/info/exclude"
        git -C "$dst" add -A .
        git -C "$dst" commit -q -m "Debian $(cat "$work/src/.unpacked"), as dpkg-source -x unpacks it"
        git -C "$dst" tag debian
    else
        stamp "fork-src: series changed; back to the Debian base"
        git -C "$dst" am --abort >/dev/null 2>&1 || true
        git -C "$dst" reset -q --hard refs/tags/debian  # (debian/ is also a path)
        git -C "$dst" clean -q -fd
    fi
    rm -f "$dst/.series-applied"
    local p
    for p in "${patches[@]}"; do
        [ -f "$p" ] || { echo "build.sh: series names missing patch $p" >&2; exit 1; }
    done
    echo "build.sh: git am ${#patches[@]} patches"
    git -C "$dst" am -q --whitespace=nowarn "${patches[@]}" || {
        git -C "$dst" am --abort >/dev/null 2>&1 || true
        echo "build.sh: git am failed" >&2
        exit 1
    }
    echo "$sum" > "$dst/.series-applied"
}

# ---------------------------------------------------------------------------
# libaioloop for the fork: this tree's library, built static (only
# libaioloop.a, so the linker cannot pick a shared one) and installed into
# WORKDIR/aioloop-prefix, where the series' meson.build finds it with
# dependency('aioloop') through pkg-config.  Assertions stay on, so the
# library's debug contracts check QEMU's use of it in the unit tests.
AIOLOOP_BUILD=$work/aioloop-build
AIOLOOP_PREFIX=$work/aioloop-prefix
pkg_config_path_outside=${PKG_CONFIG_PATH-}
export PKG_CONFIG_PATH=$AIOLOOP_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
aioloop_hook() {
    local opts=(-Ddefault_library=static -Dtests=false -Dpython=disabled)
    local log=$work/aioloop-build.log
    {
        if [ ! -f "$AIOLOOP_BUILD/build.ninja" ]; then
            stamp "libaioloop: meson setup $AIOLOOP_BUILD (static)"
            meson setup "$AIOLOOP_BUILD" "$repo" "${opts[@]}" \
                --prefix="$AIOLOOP_PREFIX" --libdir=lib
        else
            meson setup --reconfigure "$AIOLOOP_BUILD" "$repo" "${opts[@]}"
        fi &&
        "${nice_cmd[@]}" ninja -C "$AIOLOOP_BUILD" &&
        meson install --no-rebuild --quiet -C "$AIOLOOP_BUILD"
    } > "$log" 2>&1 || {
        tail -n 30 "$log" >&2
        echo "build.sh: building libaioloop for the fork failed; see $log" >&2
        exit 1
    }
}

# Configure $2 from source $1 with flags "${@:3}", unless it was already
# configured with exactly these flags.
configure_tree() {
    local src=$1 bld=$2; shift 2
    local want
    want=$(printf '%s\n' "$src" "$@")
    if [ -f "$bld/build.ninja" ] && [ -f "$bld/.configured" ] &&
       [ "$(cat "$bld/.configured")" = "$want" ]; then
        echo "build.sh: $(basename "$bld"): configured already"
        return 0
    fi
    local t0
    t0=$(date +%s)
    mkdir -p "$bld"
    rm -f "$bld/.configured"
    stamp "configuring $(basename "$bld")"
    (cd "$bld" && "${nice_cmd[@]}" "$src/configure" "$@" > configure.log 2>&1) || {
        tail -n 40 "$bld/configure.log" >&2
        echo "build.sh: configure failed; see $bld/configure.log" >&2
        exit 1
    }
    printf '%s\n' "$want" > "$bld/.configured"
    stamp "configure $(basename "$bld"): $(( $(date +%s) - t0 ))s"
}

# The ninja targets `meson test --suite unit` needs: the unit tests'
# executables and their declared dependencies (what QEMU's mtest2make
# puts in .ninja-goals.check-unit).
unit_targets() {
    local bld=$1
    /usr/bin/python3 - "$bld" <<'PY'
import json, os, subprocess, sys
bld = sys.argv[1]
info = os.path.join(bld, 'meson-info')
tests = json.load(open(os.path.join(info, 'intro-tests.json')))
targets = json.load(open(os.path.join(info, 'intro-targets.json')))
by_id = {t['id']: t for t in targets}
built = {f for t in targets for f in t['filename']}
out = set()
for t in tests:
    if not any(s.split(':')[-1] == 'unit' for s in t['suite']):
        continue
    for dep in t.get('depends', []):
        tgt = by_id.get(dep)
        if tgt:
            for f in tgt['filename']:
                out.add(os.path.relpath(f, bld))
    cmd = t['cmd'][0]
    # (a test run by a built program; 10.2 runs some by its venv's python)
    if cmd in built:
        out.add(os.path.relpath(cmd, bld))
print('\n'.join(sorted(out)))
PY
}

build_variant() {
    local v=$1 src bld t0
    src=$work/$v-src
    bld=$work/$v-build
    local flags=("${configure_flags[@]}")
    case $v in
    stock)
        # Nothing writes into stock-src: hard links are enough.
        copy_src "$src" -al ;;
    fork)
        prepare_fork_src
        aioloop_hook
        # Patch 4's feature option, required: a missing library fails
        # configure instead of building the stock aio-posix.c.
        flags+=(--enable-aioloop) ;;
    fork-disabled)
        # The same tree without the library: nothing may include or link
        # it, so it is neither built nor on pkg-config's path here.
        src=$work/fork-src
        prepare_fork_src
        PKG_CONFIG_PATH=$pkg_config_path_outside
        flags+=(--disable-aioloop) ;;
    esac
    configure_tree "$src" "$bld" "${flags[@]}"
    build_targets "$v" "$bld" "$bld/build-$what.log" || exit 1
}

# Builds the targets of $what in build tree $2 of variant $1, logging to
# $3.  Regenerates build.ninja (and meson-info) first if meson.build files
# changed, so the introspection of the unit tests is current.
build_targets() {
    local v=$1 bld=$2 log=$3 t0 goals
    "${nice_cmd[@]}" ninja -C "$bld" build.ninja > "$log" 2>&1 || {
        tail -n 40 "$log" >&2
        echo "build.sh: regenerating $bld failed; see $log" >&2
        return 1
    }
    mapfile -t goals < <(unit_targets "$bld")
    [ ${#goals[@]} -gt 0 ] || { echo "build.sh: no unit tests found in $bld" >&2; return 1; }
    [ "$what" = all ] && goals+=(qemu-system-x86_64 qemu-img qemu-io qemu-nbd
                                 storage-daemon/qemu-storage-daemon
                                 tests/qtest/qos-test)

    t0=$(date +%s)
    stamp "building $v: ${#goals[@]} ninja targets ($what), -j$jobs"
    "${nice_cmd[@]}" ninja -C "$bld" -j "$jobs" "${goals[@]}" >> "$log" 2>&1 || {
        grep -B2 -A20 -m3 'FAILED\|error:' "$log" >&2 || tail -n 40 "$log" >&2
        echo "build.sh: build failed; see $log" >&2
        return 1
    }
    stamp "build $v ($what): $(( $(date +%s) - t0 ))s"
}

# --check-series: every patch builds on its own.  Checks out the series
# one patch at a time in fork-src (git rewrites only the files a patch
# changes, so ninja rebuilds only what it touched) and builds there.
check_series_builds() {
    local src=$work/fork-src bld=$work/fork-build tip c k=0 commits
    tip=$(git -C "$src" rev-parse HEAD)
    mapfile -t commits < <(git -C "$src" rev-list --reverse refs/tags/debian..HEAD)
    for c in "${commits[@]}"; do
        k=$((k + 1))
        git -C "$src" checkout -q --detach "$c"
        stamp "check-series: patch $k/${#commits[@]}: $(git -C "$src" log -1 --format=%s "$c")"
        build_targets fork "$bld" "$bld/check-series-$k.log" || {
            git -C "$src" checkout -q --detach "$tip"
            echo "build.sh: patch $k of the series does not build on its own" >&2
            exit 1
        }
    done
    git -C "$src" checkout -q --detach "$tip"
    stamp "check-series: each of the ${#commits[@]} patches builds"
}

for v in "${variants[@]}"; do
    build_variant "$v"
done
if $check_series; then
    check_series_builds
fi
stamp "done"
