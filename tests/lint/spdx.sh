#!/bin/sh
# SPDX-License-Identifier: MIT
# spdx.sh [SOURCE_ROOT] - fails, listing them, if a tracked file of a kind
# that can carry a comment (sources, scripts, build files, docs) has no
# SPDX-License-Identifier line in its first three lines.  `reuse lint`
# alone would not notice: .reuse/dep5 gives every file a licence, so that
# the data files (fuzz corpora, ABI baselines, generated benchmark pages)
# have one.  Exits 77 (skip) outside a git checkout.
root=${1:-.}

. "$(dirname "$0")/need-git.sh"
need_git spdx "$root"

# (assembled, so that reuse does not read this line as a licence tag)
tag='SPDX-License''-Identifier: '
missing=$(git -C "$root" ls-files -- '*.c' '*.h' '*.py' '*.sh' '*.lua' \
        '*.md' '*.map' '*.gp' '*.in' '*meson.build' 'meson.options' \
        'meson_options.txt' 'Makefile' '.gitignore' '.ci/*' 'debian/rules' \
        'integrations/qemu/patches/series' ':!docs/bench/*' |
    while IFS= read -r f; do
        head -n 3 "$root/$f" | grep -q "$tag" ||
            echo "$f"
    done)
if [ -n "$missing" ]; then
    echo "spdx: no SPDX-License-Identifier line in the first three lines of:"
    echo "$missing" | sed 's/^/  /'
    exit 1
fi
echo "spdx: every source, script, build file and page says its licence"
