#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-tests.sh [WORKDIR] [stock|fork|fork-disabled] [-- extra meson test args]
#
# Runs QEMU's unit tests (`meson test --suite unit`, what `make check-unit`
# runs) in WORKDIR/<variant>-build, as built by build.sh (it does not
# rebuild: --no-rebuild).  WORKDIR defaults to <repo>/build-qemu10, the
# variant to fork.  Ends with one summary line:
#     qemu-<variant>: N passed, N failed, N skipped
# and exits non-zero if any test failed or timed out.
#
# Environment: NUM_PROCESSES (default 2), TIMEOUT_MULTIPLIER (default 4),
# LOGBASE (meson's --logbase, default unit-<variant>; the per-test results
# are in <build>/meson-logs/<logbase>.json and .txt).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/guest-lib.sh"

variant=fork extra=()
while [ $# -gt 0 ]; do
    case $1 in
        stock|fork|fork-disabled) variant=$1 ;;
        --) shift; extra=("$@"); break ;;
        *) guest_arg run-tests.sh "$1" ;;
    esac
    shift
done
work=$(guest_workdir "$guest_work")
bld=$work/$variant-build
# A QEMU configured by a newer meson than Debian's (10.2, build.sh --qemu
# 10.2) runs its tests with that meson, from WORKDIR/tools.
if [ -d "$work/tools/usr/bin" ]; then
    export PATH="$work/tools/usr/bin:$PATH"
    export PYTHONPATH="$work/tools/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}"
fi
[ -f "$bld/build.ninja" ] || { echo "run-tests.sh: $bld is not built; run build.sh --$variant first" >&2; exit 1; }

logbase=${LOGBASE:-unit-$variant}
t0=$(date +%s)
rc=0
(cd "$bld" && meson test --no-rebuild --suite unit --print-errorlogs \
    --num-processes "${NUM_PROCESSES:-2}" \
    --timeout-multiplier "${TIMEOUT_MULTIPLIER:-4}" \
    --logbase "$logbase" "${extra[@]}") || rc=$?
secs=$(( $(date +%s) - t0 ))

# Count from meson's JSON log (one object per test).
/usr/bin/python3 - "$bld/meson-logs/$logbase.json" "$variant" "$secs" <<'PY' || rc=1
import json, sys
path, variant, secs = sys.argv[1], sys.argv[2], sys.argv[3]
counts = {'passed': 0, 'failed': 0, 'skipped': 0}
bad = []
with open(path) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        t = json.loads(line)
        r = t.get('result', '')
        if r in ('OK', 'EXPECTEDFAIL'):
            counts['passed'] += 1
        elif r == 'SKIP':
            counts['skipped'] += 1
        else:
            counts['failed'] += 1
            bad.append(f"{t.get('name')} ({r})")
if bad:
    print('failed: ' + ', '.join(bad))
print(f"(unit tests of qemu {variant} in {secs}s)")
print(f"qemu-{variant}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
sys.exit(1 if counts['failed'] else 0)
PY
exit $rc
