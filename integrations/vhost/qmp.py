#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""qmp.py SOCKET COMMAND [ARGS-JSON] [--event NAME] [--timeout SECONDS]

Sends one QMP command to the QEMU listening on the unix SOCKET (after the
greeting and qmp_capabilities) and prints its "return" as JSON.  With
--event, then waits for the event NAME (one that the command causes, such
as DEVICE_DELETED after device_del) and prints it too.  Exits 1 with
QMP's error message if the command fails, 2 if the event does not come
within the timeout (default 60 s).  For the scripts that drive a QEMU
under test (lifecycle-test.sh)."""
import argparse
import json
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[0])
    ap.add_argument("socket")
    ap.add_argument("command")
    ap.add_argument("args", nargs="?", default="{}")
    ap.add_argument("--event")
    ap.add_argument("--timeout", type=float, default=60.0)
    o = ap.parse_args()
    deadline = time.monotonic() + o.timeout

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(o.timeout)
    s.connect(o.socket)
    f = s.makefile("rw")

    def send(cmd, args):
        f.write(json.dumps({"execute": cmd, "arguments": args}) + "\n")
        f.flush()

    def next_msg():
        line = f.readline()
        if not line:
            sys.exit("qmp.py: QEMU closed the monitor")
        return json.loads(line)

    events = []

    def reply():
        while True:
            m = next_msg()
            if "event" in m:
                events.append(m)
                continue
            return m

    next_msg()  # the greeting
    send("qmp_capabilities", {})
    reply()
    send(o.command, json.loads(o.args))
    r = reply()
    if "error" in r:
        print("qmp.py: %s: %s" % (o.command, r["error"].get("desc")),
              file=sys.stderr)
        return 1
    print(json.dumps(r.get("return")))
    if o.event is None:
        return 0
    while True:
        for e in events:
            if e["event"] == o.event:
                print(json.dumps(e))
                return 0
        events.clear()
        left = deadline - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            events.append(next_msg())
        except socket.timeout:
            break
    print("qmp.py: no %s within %g s" % (o.event, o.timeout), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
