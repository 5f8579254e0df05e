#!/bin/sh
# SPDX-License-Identifier: MIT
# check-man3.sh MAN3DIR - the reference's man pages read as they should:
# aiol_fd_set(3) is a page of its own (not a .so link that `man -l`
# cannot follow) with its description and its return values, rendered
# by man(1); every function page of MAN3DIR has a RETURN VALUE section
# unless the function returns void; and groff formats every page that is
# not a .so link without a warning.
set -eu
dir=${1:?usage: check-man3.sh MAN3DIR}
page=$dir/aiol_fd_set.3
fail() { echo "check-man3: $*" >&2; exit 1; }

[ -f "$page" ] || fail "$page is missing"
text=$(MANWIDTH=200 man -l "$page" 2>&1) || fail "man -l $page failed: $text"
for want in 'aiol_fd_set - Shorthand for aiol_fd_set_ops()' \
            'int aiol_fd_set (aiol_loop \* loop,' \
            'RETURN VALUE' '-EBADF for a negative fd' '-ENOMEM'; do
    printf '%s\n' "$text" | grep -q -e "$want" ||
        fail "man -l $page does not show '$want':
$text"
done

n=0
for p in "$dir"/aiol_*.3; do
    # (doxygen's struct pages have a "Detailed Description" instead)
    grep -q '^\.SH DESCRIPTION' "$p" || continue
    n=$((n + 1))
    proto=$(sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/{/^\.sp$/{n;p;q}}' "$p")
    case $proto in
        'void '[!*]*) ;;
        *) grep -q '^\.SH "RETURN VALUE"' "$p" ||
               fail "$p: no RETURN VALUE section" ;;
    esac
done
[ "$n" -gt 0 ] || fail "no function pages in $dir"

for p in "$dir"/*.3; do
    grep -q '^\.so ' "$p" && continue
    warn=$(groff -man -Tutf8 -ww -z "$p" 2>&1)
    [ -z "$warn" ] || fail "groff warns on $p: $warn"
done
echo "check-man3: aiol_fd_set(3) renders with its return values; $n function pages"
