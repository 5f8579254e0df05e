#!/bin/sh
# SPDX-License-Identifier: MIT
# process-text.sh [SOURCE_ROOT] - fails, listing the lines, if any tracked
# file names the process a change came from instead of saying what the
# product does: the planning document, numbered issues, seeds or work
# sessions, or the machine by a private name.  Numbers and reasons belong
# in the code, the docs and docs/benchmarks.md, not in pointers to
# material a reader of the tree does not have.
#
# The pattern is assembled from pieces so that this file does not match
# itself.  Exits 77 (skip) outside a git checkout.
root=${1:-.}

. "$(dirname "$0")/need-git.sh"
need_git process-text "$root"

doc='BRI''EF'
num='iss''ue [0-9]'
seed='se''ed 0[0-9]'
sess='sess''ion [0-9]'
vm='proj''ect VM'
pattern="$doc|$num|$seed|$sess|$vm"

# -I: binary files (fuzz corpora, plots) are not text anyone reads.
# LICENSES/ holds the licence texts verbatim, not our words.
hits=$(git -C "$root" grep -n -I -E -i -e "$pattern" -- . ':!LICENSES/')
rc=$?
if [ $rc -eq 1 ]; then
    exit 0
fi
if [ $rc -ne 0 ]; then
    echo "process-text: git grep failed ($rc)" >&2
    exit 1
fi
echo "process-text: say what the product does, not where the work came from:" >&2
printf '%s\n' "$hits" >&2
exit 1
