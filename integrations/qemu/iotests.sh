#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# iotests.sh [WORKDIR] [VARIANT]
#
# QEMU's own qemu-iotests, the "quick" group on raw images with
# aio=io_uring (`check -raw -i io_uring -g quick`), on the fork built by
# build.sh --all (VARIANT fork, the default) once per fd monitor in
# $IOTESTS_FDMONS (default: io_uring epoll): on io_uring the requests go
# on the AioContext's own ring, on epoll on block/io_uring.c's own ring
# (7.2's path, where test 101 hung before patch 20).
# Prints one line per fd monitor and a closing "iotests: N passed, N
# failed" line; exits non-zero when a test failed that is not in
# KNOWN_STOCK: tests that fail the same way on stock 7.2 built from the
# same source (307: blockdev-nbd.c's assertion `qemu_in_main_thread() &&
# nbd_server' when an NBD client of an iothread's export goes away; fixed
# upstream after 7.2).  WORKDIR defaults to <repo>/build-qemu.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=$(realpath -m "${1:-$repo/build-qemu}")
variant=${2:-fork}
build=$work/$variant-build
KNOWN_STOCK="307"
read -r -a fdmons <<< "${IOTESTS_FDMONS:-io_uring epoll}"

[ -x "$build/qemu-nbd" ] && [ -x "$build/qemu-img" ] ||
    { echo "iotests.sh: no $build/qemu-nbd; run build.sh --all" >&2; exit 1; }
. "$here/pkgs.sh"
# (the firmware qemu-system-x86_64 loads even under qtest)
firmware_link iotests.sh "$build"

passed=0 failed=0 bad=()
for b in "${fdmons[@]}"; do
    log=$build/iotests-$b.log
    rc=0
    (cd "$build/tests/qemu-iotests" &&
     AIOLOOP_FDMON=$b timeout 1800 ./check -raw -i io_uring -g quick) \
        > "$log" 2>&1 || rc=$?
    fails=$(sed -n 's/^Failures: //p' "$log")
    summary=$(grep -E '^(Passed all|Failed [0-9]+ of) [0-9]+ iotests' "$log" || true)
    unexpected=()
    for t in $fails; do
        [[ " $KNOWN_STOCK " == *" $t "* ]] || unexpected+=("$t")
    done
    if [ -z "$summary" ] || { [ "$rc" != 0 ] && [ -z "$fails" ]; }; then
        echo "iotests [$b]: FAIL: the run did not finish (exit $rc), see $log"
        failed=$((failed + 1)); bad+=("$b")
    elif [ ${#unexpected[@]} -gt 0 ]; then
        echo "iotests [$b]: FAIL: ${unexpected[*]} ($summary), see $log"
        failed=$((failed + 1)); bad+=("$b")
    else
        echo "iotests [$b]: PASS: $summary${fails:+; failing on stock 7.2 too: $fails}"
        passed=$((passed + 1))
    fi
done
echo "iotests: $passed passed, $failed failed"
[ "$failed" = 0 ]
