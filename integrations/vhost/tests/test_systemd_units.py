#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_systemd_units.py DAEMON SOCKET-UNIT SERVICE-UNIT

The systemd units of aioloop-vhost-blk (integrations/vhost/systemd), as
installed, checked two ways:

1. systemd's own checker: `systemd-analyze verify` on an instance of both
   units (ExecStart pointed at DAEMON, the build's daemon).
2. What systemd does when QEMU connects, step by step: the socket unit's
   ListenStream (specifiers %t and %i resolved) is opened by
   `systemd-socket-activate` (the same LISTEN_FDS hand-over), which runs
   the service unit's ExecStart with the variables of its EnvironmentFile
   expanded as systemd expands them (${X}: one word, $X: split on
   whitespace).  The daemon must say it listens on fd 3, answer a
   vhost-user GET_FEATURES on the unit's socket path with VIRTIO_F_VERSION_1
   and VHOST_USER_F_PROTOCOL_FEATURES, serve a second connection after
   the first goes, and exit 0 on the unit's KillSignal.

Exits 77 (skipped) where systemd-analyze or systemd-socket-activate is
missing."""
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

INSTANCE = "disk0"


def fail(msg):
    print("test_systemd_units: FAIL: " + msg)
    sys.exit(1)


def unit_keys(path):
    """{(section, key): value} of a unit file (last value wins)."""
    keys, section = {}, None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            k, _, v = line.partition("=")
            keys[(section, k.strip())] = v.strip()
    return keys


def env_file(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and line[0] not in "#;":
                k, _, v = line.partition("=")
                env[k.strip()] = " ".join(shlex.split(v)) if v else ""
    return env


def expand_exec(line, env):
    """systemd's ExecStart expansion: ${X} one word, $X split words."""
    argv = []
    for word in shlex.split(line):
        m = re.fullmatch(r"\$\{(\w+)\}", word)
        if m:
            argv.append(env.get(m.group(1), ""))
            continue
        m = re.fullmatch(r"\$(\w+)", word)
        if m:
            argv.extend(env.get(m.group(1), "").split())
            continue
        argv.append(re.sub(r"\$\{(\w+)\}",
                           lambda x: env.get(x.group(1), ""), word))
    return argv


def get_features(path):
    """A vhost-user GET_FEATURES round trip on the unix socket @path."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    s.sendall(struct.pack("<III", 1, 0x1, 0))  # GET_FEATURES, version 1
    reply = b""
    while len(reply) < 20:
        chunk = s.recv(20 - len(reply))
        if not chunk:
            fail("the daemon closed the connection before replying")
        reply += chunk
    s.close()
    req, flags, size, features = struct.unpack("<IIIQ", reply)
    if req != 1 or not flags & 0x4 or size != 8:
        fail("a bad GET_FEATURES reply: %r" % (reply,))
    return features


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.split("\n\n")[0])
    daemon, socket_unit, service_unit = (os.path.abspath(a)
                                         for a in sys.argv[1:])
    for tool in ("systemd-analyze", "systemd-socket-activate"):
        if shutil.which(tool) is None:
            print("test_systemd_units: SKIP: no %s here" % tool)
            sys.exit(77)
    svc = unit_keys(service_unit)
    sock = unit_keys(socket_unit)
    exec_start = svc[("Service", "ExecStart")]
    prog = exec_start.split()[0]
    if not prog.endswith("/aioloop-vhost-blk"):
        fail("ExecStart runs %s, not aioloop-vhost-blk" % prog)
    if svc.get(("Unit", "Requires")) != "aioloop-vhost-blk@%i.socket":
        fail("the service does not require its socket")

    tmp = tempfile.mkdtemp(prefix="aiol-units-")
    try:
        # 1. systemd-analyze verify, on copies whose paths exist here
        conf = os.path.join(tmp, INSTANCE + ".conf")
        image = os.path.join(tmp, INSTANCE + ".img")
        with open(image, "wb") as f:
            f.truncate(1 << 20)
        with open(conf, "w") as f:
            f.write("# as /etc/aioloop-vhost-blk/%s.conf\nIMAGE=%s\n"
                    "OPTIONS=--num-queues 2 --aio threads\n"
                    % (INSTANCE, image))
        with open(service_unit) as f:
            text = f.read().replace(prog, daemon, 1)
            text = text.replace("/etc/aioloop-vhost-blk/%i.conf",
                                os.path.join(tmp, "%i.conf"))
        with open(os.path.join(tmp, "aioloop-vhost-blk@.service"), "w") as f:
            f.write(text)
        shutil.copy(socket_unit, os.path.join(tmp, "aioloop-vhost-blk@.socket"))
        inst = [os.path.join(tmp, "aioloop-vhost-blk@%s.%s" % (INSTANCE, t))
                for t in ("socket", "service")]
        r = subprocess.run(["systemd-analyze", "verify", "--man=no"] + inst,
                           capture_output=True, text=True)
        # (a container without a running systemd may warn about itself;
        # what concerns our units names them)
        ours = [l for l in (r.stdout + r.stderr).splitlines()
                if "aioloop-vhost-blk" in l]
        if r.returncode != 0 or ours:
            fail("systemd-analyze verify: rc %d\n%s%s"
                 % (r.returncode, r.stdout, r.stderr))

        # 2. the activation, as systemd does it
        listen = sock[("Socket", "ListenStream")]
        listen = listen.replace("%t", tmp).replace("%i", INSTANCE)
        os.makedirs(os.path.dirname(listen), exist_ok=True)
        unit_env = env_file(conf)
        argv = expand_exec(exec_start, unit_env)
        argv[0] = daemon
        if argv[1:3] != ["--file", image] or "--num-queues" not in argv:
            fail("ExecStart expanded to %r" % (argv,))
        log = open(os.path.join(tmp, "daemon.log"), "w+")
        p = subprocess.Popen(["systemd-socket-activate", "-l", listen, "--"]
                             + argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(200):
                if os.path.exists(listen):
                    break
                time.sleep(0.05)
            else:
                fail("no socket at %s" % listen)
            for n in range(2):  # the second after the first went
                feats = get_features(listen)
                if not feats & (1 << 32) or not feats & (1 << 30):
                    fail("features %#x lack VERSION_1 or PROTOCOL_FEATURES"
                         % feats)
            log.seek(0)
            out = log.read()
            if "listening on fd 3" not in out:
                fail("the daemon did not take descriptor 3:\n" + out)
            kill = svc.get(("Service", "KillSignal"), "SIGTERM")
            p.send_signal(getattr(signal, kill))
            rc = p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        if rc != 0:
            log.seek(0)
            fail("exit status %d on %s:\n%s" % (rc, kill, log.read()))
        print("test_systemd_units: OK: verified; activated on %s, two "
              "connections served, exit 0 on %s" % (listen, kill))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
