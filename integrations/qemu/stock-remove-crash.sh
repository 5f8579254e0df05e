#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# stock-remove-crash.sh [WORKDIR] - shows the stock 7.2 bug that patch 0005's
# test guards against: builds tests/unit/test-aio-remove.c (from the fork's
# tree) against the *stock* build, exactly as stock builds test-aio, and
# runs it.  Stock's fdmon-io_uring leaves user_data unset on its remove
# SQEs, so the test crashes there; the fork passes it on every fd monitor.
# Exit status: 0 if stock crashed as expected, 1 if it did not.
set -euo pipefail
work=$(realpath -m "${1:-$(dirname "$0")/../../build-qemu}")
stock=$work/stock-build
src=$work/fork-src/tests/unit/test-aio-remove.c
out=$work/stock-remove
[ -f "$stock/build.ninja" ] && [ -f "$src" ] || {
    echo "stock-remove-crash: build stock and fork first (build.sh --both)" >&2; exit 2; }
cd "$stock"
# test-aio's own compile and link lines, with our source and output.
/usr/bin/python3 - "$src" "$out" <<'PY'
import json, re, subprocess, sys
src, out = sys.argv[1], sys.argv[2]
entry = next(e for e in json.load(open("compile_commands.json"))
             if e["file"].endswith("tests/unit/test-aio.c"))
cmd = re.sub(r"-MD -MQ \S+ -MF \S+", "", entry["command"])
cmd = cmd.replace(entry["file"], src)
cmd = re.sub(r"-o \S+test-aio\.c\.o", f"-o {out}.o", cmd)
subprocess.run(cmd, shell=True, check=True)
link = re.search(r"^build tests/unit/test-aio: .*\n LINK_ARGS = (.*)$",
                 open("build.ninja").read(), re.M).group(1)
subprocess.run(f"cc -o {out} {out}.o {link}", shell=True, check=True)
PY
set +e
timeout 120 "$out" > "$out.log" 2>&1
rc=$?
set -e
tail -n 3 "$out.log"
if [ "$rc" -ge 128 ] && [ "$rc" -ne 124 ]; then
    echo "stock-remove-crash: stock 7.2 crashed as expected (signal $((rc - 128)))"
    exit 0
fi
echo "stock-remove-crash: stock 7.2 did not crash (exit $rc)"
exit 1
