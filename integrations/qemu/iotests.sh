#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# iotests.sh [WORKDIR] [VARIANT]
#
# QEMU's own qemu-iotests, the "quick" group on raw images
# (`check -raw -i AIO -g quick`), on a build of build.sh --all (VARIANT
# fork, the default; or stock) once per run in $IOTESTS_RUNS, each run
# FDMON:AIO (the libaioloop fd monitor, AIOLOOP_FDMON, and the -i mode;
# aio=native runs with -c none, the O_DIRECT it needs).
# Default runs: io_uring:io_uring io_uring:native io_uring:threads
# epoll:threads.  aio=io_uring needs an AioContext with a ring
# (aio_add_sqe()), so on epoll it is not offered, as upstream.
# Prints one line per run and a closing "iotests: N passed, N failed"
# line; exits non-zero when a test failed that is not in the known list:
# tests that fail the same way on stock QEMU built from the same source
# (with aio=native: 045, whose fd sets hold no O_DIRECT descriptor for
# cache=none).  WORKDIR defaults to <repo>/build-qemu10.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(realpath -m "${1:-$repo/build-qemu10}")
variant=${2:-fork}
build=$work/$variant-build

[ -x "$build/qemu-nbd" ] && [ -x "$build/qemu-img" ] ||
    { echo "iotests.sh: no $build/qemu-nbd; run build.sh --all" >&2; exit 1; }
. "$here/pkgs.sh"
version=$(qemu_version "$build/qemu-img")
# KNOWN_STOCK: AIO:TEST (or *:TEST for every mode)
KNOWN_STOCK="native:045"
default_runs="io_uring:io_uring io_uring:native io_uring:threads epoll:threads"
read -r -a runs <<< "${IOTESTS_RUNS:-$default_runs}"
# (the firmware qemu-system-x86_64 loads even under qtest)
firmware_link iotests.sh "$build"

passed=0 failed=0 bad=()
for run in "${runs[@]}"; do
    b=${run%%:*} aio=${run#*:}
    log=$build/iotests-$b-$aio.log
    rc=0
    t0=$(date +%s)
    cache=()
    [ "$aio" != native ] || cache=(-c none) # (aio=native needs O_DIRECT)
    (cd "$build/tests/qemu-iotests" &&
     AIOLOOP_FDMON=$b timeout 1800 ./check -raw -i "$aio" "${cache[@]}" -g quick) \
        > "$log" 2>&1 || rc=$?
    took=$(( $(date +%s) - t0 ))s
    fails=$(sed -n 's/^Failures: //p' "$log")
    summary=$(grep -E '^(Passed all|Failed [0-9]+ of) [0-9]+ iotests' "$log" || true)
    unexpected=()
    for t in $fails; do
        [[ " $KNOWN_STOCK " == *" $aio:$t "* || " $KNOWN_STOCK " == *" *:$t "* ]] ||
            unexpected+=("$t")
    done
    if [ -z "$summary" ] || { [ "$rc" != 0 ] && [ -z "$fails" ]; }; then
        echo "iotests [$b, aio=$aio]: FAIL: the run did not finish (exit $rc), see $log"
        failed=$((failed + 1)); bad+=("$run")
    elif [ ${#unexpected[@]} -gt 0 ]; then
        echo "iotests [$b, aio=$aio]: FAIL: ${unexpected[*]} ($summary), see $log"
        failed=$((failed + 1)); bad+=("$run")
    else
        echo "iotests [$b, aio=$aio]: PASS: $summary in $took${fails:+; failing on stock $version too: $fails}"
        passed=$((passed + 1))
    fi
done
echo "iotests: $passed passed, $failed failed"
[ "$failed" = 0 ]
