#!/bin/sh
# SPDX-License-Identifier: MIT
# mirror.sh [SUITE] - prints the Debian archive this machine's apt uses
# for SUITE (default: this release): the URI of its first source for it, a
# deb822 entry in /etc/apt/sources.list.d/*.sources or a line of
# /etc/apt/sources.list whose suites include it.  So scripts reaching
# other releases (mmdebstrap, a private apt configuration) take the same
# mirror, and the security archive with `mirror.sh bookworm-security`,
# and write no host name of their own.  Fails when there is none.
set -eu
etc=${APT_ETC:-/etc/apt}
codename=${1:-$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null || true)}
[ -n "$codename" ] || { echo "mirror.sh: no VERSION_CODENAME in /etc/os-release" >&2; exit 1; }

# (deb822: an entry is a paragraph; its Types, URIs and Suites fields)
uri=$(cat "$etc"/sources.list.d/*.sources 2>/dev/null | awk -v rel="$codename" '
    function done_entry() {
        if (!found && types ~ /(^| )deb( |$)/ && suites ~ ("(^| )" rel "( |$)") && uris != "") {
            split(uris, u, " "); print u[1]; found = 1; exit
        }
        types = ""; uris = ""; suites = ""
    }
    /^[ \t]*$/ { done_entry(); next }
    /^#/ { next }
    tolower($1) == "types:"  { $1 = ""; types = $0 }
    tolower($1) == "uris:"   { $1 = ""; sub(/^ +/, ""); uris = $0 }
    tolower($1) == "suites:" { $1 = ""; suites = $0 }
    END { done_entry() }')
if [ -z "$uri" ] && [ -f "$etc/sources.list" ]; then
    # (one-line style: deb [options] URI SUITE COMPONENT...)
    uri=$(awk -v rel="$codename" '
        $1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
            if ($(i + 1) == rel) { print $i; exit }
        }' "$etc/sources.list")
fi
[ -n "$uri" ] || { echo "mirror.sh: no apt source for $codename in $etc" >&2; exit 1; }
echo "${uri%/}"
