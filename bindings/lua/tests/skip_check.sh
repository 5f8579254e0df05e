#!/bin/sh
# SPDX-License-Identifier: MIT
# skip_check.sh URING_REFUSED PROGRAM [ARGS...] - the skip of a Lua test
# script (fdmon_or_skip.lua), checked where io_uring works:
#   - with io_uring_setup refused (uring-refused: ENOSYS, EPERM, ENOMEM,
#     as a kernel, a sandbox or the locked-memory limit refuse it), the
#     run on AIOLOOP_FDMON=io_uring exits 77 with a SKIP line naming it;
#   - on an fd monitor the library does not have, it fails (not 0, not 77).
# PROGRAM [ARGS...] runs the script (lua5.4 test_aioloop.lua, lua-fault
# fault.lua); AIOLOOP_LUA_PRELOAD, when set, is preloaded into it (a
# sanitizer's runtime).  Exits 77 itself where seccomp is unavailable.
refused=$1
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0

# run FDMON COMMAND...: COMMAND on AIOLOOP_FDMON=FDMON, output in $out
run() {
    fdmon=$1
    shift
    if [ -n "${AIOLOOP_LUA_PRELOAD:-}" ]; then
        env AIOLOOP_FDMON="$fdmon" LD_PRELOAD="$AIOLOOP_LUA_PRELOAD" "$@" > "$out" 2>&1
    else
        env AIOLOOP_FDMON="$fdmon" "$@" > "$out" 2>&1
    fi
}

"$refused" ENOSYS true
case $? in
    0) ;;
    125) echo "SKIP: no seccomp filter here: io_uring cannot be refused"; exit 77 ;;
    *) echo "FAIL: uring-refused does not run"; exit 1 ;;
esac

for e in ENOSYS EPERM ENOMEM; do
    run io_uring "$refused" "$e" "$@"
    rc=$?
    if [ "$rc" = 77 ] && grep -q '^SKIP: fd monitor io_uring cannot start here' "$out"; then
        echo "ok: io_uring_setup -> $e: $(grep '^SKIP:' "$out")"
    else
        echo "FAIL: io_uring_setup -> $e: exit $rc, not 77 with a SKIP line:"
        tail -n 20 "$out"
        fail=1
    fi
done

run no-such-monitor "$@"
rc=$?
if [ "$rc" = 0 ] || [ "$rc" = 77 ]; then
    echo "FAIL: AIOLOOP_FDMON=no-such-monitor: exit $rc, not a failure:"
    tail -n 20 "$out"
    fail=1
else
    echo "ok: AIOLOOP_FDMON=no-such-monitor fails (exit $rc): $(head -n 1 "$out")"
fi
exit $fail
