#!/bin/sh
# SPDX-License-Identifier: MIT
# process-text.sh [SOURCE_ROOT] - fails, listing the lines, if any tracked
# file names the process a change came from instead of saying what the
# product does: the planning document, issues, the seed threads, work
# sessions or items (by number or in words), the machine by a private
# name, or, in the QEMU patches, this machine.  Numbers and reasons belong
# in the code, the docs and docs/benchmarks.md, not in pointers to
# material a reader of the tree does not have.
#
# Exits 77 (skip) outside a git checkout.
root=${1:-.}

. "$(dirname "$0")/need-git.sh"
need_git process-text "$root"

# Numbered pointers, and the same things named in words: the seed
# threads the project grew from (not a fuzzer's seed corpus), a work
# session, a work item or the planning behind it.
doc='BRI''EF'
num='iss''ue [0-9]'
seed='se''ed 0[0-9]'
sess='sess''ion [0-9]'
vm='proj''ect VM'
seedw="se""ed('s| thread| message| mail)|mailing[- ]list thr""ead"
sessw="(this|next|previous|last|earlier|later|work) sess""ion"
workw="work[- ]it""em|plann""ing (doc|note)|clos""ing note"
pattern="$doc|$num|$seed|$sess|$vm|$seedw|$sessw|$workw"
# A patch series speaks to QEMU's reviewers, who do not share our machine.
patchw="(this|our|the test) mach""ine"

# -I: binary files (fuzz corpora, plots) are not text anyone reads.
# LICENSES/ holds the licence texts verbatim, not our words.
# (this file names what it looks for)
search() {
    git -C "$root" grep -n -I -E -i "$@"
    rc=$?
    [ $rc -le 1 ] || { echo "process-text: git grep failed ($rc)" >&2; exit 1; }
}
hits=$(search -e "$pattern" -- . ':!LICENSES/' ':!tests/lint/process-text.sh'
       search -e "$patchw" -- 'integrations/qemu/patches') || exit 1
if [ -z "$hits" ]; then
    exit 0
fi
echo "process-text: say what the product does, not where the work came from:" >&2
printf '%s\n' "$hits" >&2
exit 1
