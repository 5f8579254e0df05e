# SPDX-License-Identifier: MIT
# need-git.sh - sourced by the lints that read the tracked files:
# need_git NAME ROOT exits 77 (skip), saying so, when ROOT is not inside
# a git checkout (or there is no git).
need_git() {
    if ! command -v git >/dev/null 2>&1 ||
       ! git -C "$2" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        echo "$1: $2 is not a git checkout; skipped"
        exit 77
    fi
}
