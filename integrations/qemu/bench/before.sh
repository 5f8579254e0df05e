#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# before.sh REV [WORKDIR]
#
# Builds WORKDIR/bench-before/aio-bench: aio-bench as the fork was at this
# repository's revision REV, for run.sh's before/after columns (run.sh
# --before REV calls it).  Rebuilding the whole fork at REV would take a
# QEMU build; instead this takes the current fork build
# (WORKDIR/fork-build, build.sh --fork) and swaps in what REV had:
#   - libaioloop at REV, built and installed as build.sh builds this
#     tree's (static, assertions on) into WORKDIR/before-aioloop-prefix;
#   - util/aio-aiol.c as REV's patch series leaves it, compiled with the
#     fork build's own command against REV's headers.
# That is the whole fork at REV only if REV's series differs from the
# current one in util/aio-aiol.c alone; the script applies REV's series
# to the fork's Debian base (a git worktree of WORKDIR/fork-src) and stops
# with an error when any other file differs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
[ $# -ge 1 ] || { sed -n '3,17{s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }
rev=$(git -C "$repo" rev-parse --verify "$1^{commit}")
work=$(realpath -m "${2:-$repo/build-qemu10}")
fork_src=$work/fork-src fork_build=$work/fork-build
src=$work/before-src tree=$work/before-fork
lib_build=$work/before-aioloop-build prefix=$work/before-aioloop-prefix
out=$work/bench-before
nice_cmd=(nice -n "${NICE:-10}")
say() { echo "before.sh: $*" >&2; }

[ -f "$fork_build/build.ninja" ] && [ -d "$fork_src/.git" ] ||
    { say "no fork build in $work (build.sh --fork first)"; exit 1; }
[ -f "$work/bench-fork/commands.txt" ] ||
    { say "no $work/bench-fork/commands.txt (run.sh --compile-only first)"; exit 1; }

# REV's sources.
rm -rf "$src" && mkdir -p "$src"
git -C "$repo" archive "$rev" | tar -x -C "$src"

# libaioloop at REV.
rm -rf "$lib_build" "$prefix"
say "libaioloop at ${rev:0:12} -> $prefix"
{
    meson setup "$lib_build" "$src" -Ddefault_library=static -Dtests=false \
        -Dpython=disabled --prefix="$prefix" --libdir=lib &&
    "${nice_cmd[@]}" ninja -C "$lib_build" &&
    meson install --no-rebuild --quiet -C "$lib_build"
} > "$work/before-aioloop.log" 2>&1 ||
    { tail -n 20 "$work/before-aioloop.log" >&2; exit 1; }

# REV's series on the fork's base, in a worktree of fork-src.
base=$(git -C "$fork_src" rev-list --max-parents=0 HEAD)
git -C "$fork_src" worktree remove --force "$tree" 2> /dev/null || rm -rf "$tree"
git -C "$fork_src" worktree prune
git -C "$fork_src" worktree add --quiet --detach "$tree" "$base"
while read -r p; do
    case $p in ''|'#'*) continue ;; esac
    git -C "$tree" -c user.name=before -c user.email=before@localhost \
        am --quiet --keep-cr "$src/integrations/qemu/patches/$p" ||
        { say "REV's $p does not apply to the fork's base"; exit 1; }
done < "$src/integrations/qemu/patches/series"
other=$(git -C "$fork_src" diff --name-only "$(git -C "$tree" rev-parse HEAD)" HEAD |
        grep -vx 'util/aio-aiol.c' || true)
if [ -n "$other" ]; then
    say "REV's series differs from the current one beyond util/aio-aiol.c:"
    echo "$other" | sed 's/^/    /' >&2
    say "build the fork at REV in full instead"
    exit 1
fi

# aio-aiol.o at REV, and aio-bench linked with it and REV's libaioloop.
mkdir -p "$out"
/usr/bin/python3 - "$fork_build" "$tree" "$work" "$prefix" "$out" <<'PY'
import os, shlex, subprocess, sys
bld, tree, work, prefix, out = sys.argv[1:]
cur = os.path.join(work, 'aioloop-prefix')

def commands(target):
    return shlex.split(subprocess.check_output(
        ['ninja', '-C', bld, '-t', 'commands', '-s', target], text=True))

def swap_prefix(args):
    return [a.replace(cur + '/', prefix + '/') for a in args]

member = 'libqemuutil.a.p/util_aio-aiol.c.o'
obj = os.path.join(out, 'aio-aiol.o')
cc = swap_prefix(commands(member))
i = cc.index('-o')
cc[i + 1] = obj
cc = [a for a in cc if a != '-MD']
for opt in ('-MQ', '-MF'):
    while opt in cc:
        j = cc.index(opt)
        del cc[j:j + 2]
cc[cc.index('../fork-src/util/aio-aiol.c')] = os.path.join(tree, 'util/aio-aiol.c')

# A thin archive of the fork's libqemuutil.a members, aio-aiol's swapped.
members = subprocess.check_output(['ar', 't', 'libqemuutil.a'], cwd=bld,
                                  text=True).split()
assert member in members, members
lib = os.path.join(out, 'libqemuutil.a')
if os.path.exists(lib):
    os.unlink(lib)
ar = ['ar', 'crsT', lib] + [obj if m == member else os.path.join(bld, m)
                            for m in members]

# aio-bench: the fork's own commands, recorded by run.sh.
cmds = open(os.path.join(work, 'bench-fork', 'commands.txt')).read().splitlines()
bcc, bld_ld = shlex.split(cmds[1]), shlex.split(cmds[2])
bench_obj = os.path.join(out, 'aio-bench.o')
bcc = ['-DAIO_BENCH_BUILD="before"' if a.startswith('-DAIO_BENCH_BUILD=')
       else a for a in swap_prefix(bcc)]
bcc[bcc.index('-o') + 1] = bench_obj
ld = swap_prefix(bld_ld)
ld = [lib if a == 'libqemuutil.a' else
      bench_obj if a.endswith('/bench-fork/aio-bench.o') else a for a in ld]
ld[ld.index('-o') + 1] = os.path.join(out, 'aio-bench')
assert bench_obj in ld and lib in ld, shlex.join(ld)

for cmd in (cc, ar, bcc, ld):
    r = subprocess.run(['nice', '-n', os.environ.get('NICE', '10')] + cmd, cwd=bld)
    if r.returncode:
        sys.stderr.write('before.sh: failed in %s:\n%s\n' % (bld, shlex.join(cmd)))
        sys.exit(1)
with open(os.path.join(out, 'commands.txt'), 'w') as f:
    f.write('cd %s\n%s\n%s\n%s\n%s\n' % (bld, shlex.join(cc), shlex.join(ar),
                                         shlex.join(bcc), shlex.join(ld)))
PY
echo "${rev:0:12}" > "$out/rev"
say "built $out/aio-bench (the fork at ${rev:0:12})"
