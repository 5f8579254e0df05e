# SPDX-License-Identifier: MIT
# apt-lib.sh - sourced by fetch-source.sh and fetch-tool.sh: a private apt
# configuration for one Debian suite, whose package lists and cache live
# in a directory of the caller's and whose mirror is the one this
# machine's apt uses (tests/distros/mirror.sh).  The system's apt sources
# are never edited, and no host name is written here.
#
# apt_private DIR TYPE SUITE: writes DIR/sources.list.d/private.sources
# for TYPE (deb or deb-src) and SUITE (bookworm also takes its -updates
# and -security suites; another suite, sid or bookworm-backports, is
# taken alone) and sets apt_opts, the options that point apt-get at it.
# Updates the lists.

apt_lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

apt_private() {
    local dir=$1 type=$2 suite=$3 mirror security
    local mirror_sh=$apt_lib_dir/../../tests/distros/mirror.sh
    mkdir -p "$dir/sources.list.d" "$dir/lists/partial" \
        "$dir/cache/archives/partial"
    mirror=$(sh "$mirror_sh")
    {
        printf 'Types: %s\nURIs: %s\nComponents: main\n' "$type" "$mirror"
        printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        case $suite in
            bookworm)
                printf 'Suites: bookworm bookworm-updates\n'
                security=$(sh "$mirror_sh" bookworm-security)
                printf '\nTypes: %s\nURIs: %s\nComponents: main\n' "$type" "$security"
                printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
                printf 'Suites: bookworm-security\n' ;;
            *) printf 'Suites: %s\n' "$suite" ;;
        esac
    } > "$dir/sources.list.d/private.sources"
    apt_opts=(
        -o "Dir::Etc::SourceList=/dev/null"
        -o "Dir::Etc::SourceParts=$dir/sources.list.d"
        -o "Dir::State::Lists=$dir/lists"
        -o "Dir::Cache=$dir/cache"
        -o "APT::Sandbox::User=root"
        # (sid's index may be past its valid-until date on a mirror)
        -o "Acquire::Check-Valid-Until=false"
    )
    apt-get "${apt_opts[@]}" update -qq
}
