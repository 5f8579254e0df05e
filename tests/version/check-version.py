#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check-version.py - every version the project states must be the one
meson's project version gives the build tree's aioloop.pc:

    check-version.py --pkg-config PKG_CONFIG --pc-dir BUILD/meson-uninstalled
        --print-version EXE [--python PYTHONPATH] [--lua LUA CPATH_DIR]
        [--lua-env NAME=VALUE]... [--program EXE]...

The expected version is `pkg-config --modversion aioloop` with
PKG_CONFIG_PATH=PC_DIR.  Compared with it: the C macros and what the
library says (print-version.c, EXE above), Python's aioloop.__version__,
Lua's aioloop._VERSION, and `PROGRAM --version`, which must print
"PROGRAM VERSION" and exit 0 (its --help must name --version).  Prints
one line per version; exit 1 when any differs or cannot be read.
"""
import argparse
import os
import subprocess
import sys


def run(cmd, env=None):
    """(exit status, stdout) of cmd; stderr goes to ours."""
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
    return p.returncode, p.stdout


def env_with(**extra):
    env = dict(os.environ)
    env.update(extra)
    return env


def versions(args):
    """Yields (what, stated version or None, note) for everything."""
    rc, out = run([args.print_version])
    lines = [l.split(" ", 1) for l in out.splitlines() if " " in l]
    for what, v in lines:
        yield what, v, ""
    if rc != 0 or not lines:
        yield "print-version", None, "exit status %d" % rc
    if args.python:
        rc, out = run([sys.executable, "-c",
                       "import aioloop; print(aioloop.__version__)"],
                      env_with(PYTHONPATH=args.python,
                               PYTHONDONTWRITEBYTECODE="1"))
        yield "python aioloop.__version__", out.strip() if rc == 0 else None, \
            "" if rc == 0 else "exit status %d" % rc
    if args.lua:
        lua, cpath = args.lua
        extra = dict(e.split("=", 1) for e in args.lua_env)
        rc, out = run([lua, "-e", 'io.write(require("aioloop")._VERSION)'],
                      env_with(LUA_CPATH=os.path.join(cpath, "?.so"), **extra))
        yield "lua aioloop._VERSION", out if rc == 0 else None, \
            "" if rc == 0 else "exit status %d" % rc
    for prog in args.program:
        name = os.path.basename(prog)
        rc, out = run([prog, "--version"])
        words = out.split()
        ok = rc == 0 and len(words) == 2 and words[0] == name and \
            out == "%s %s\n" % (name, words[1])
        yield name + " --version", words[1] if ok else None, \
            "" if ok else "printed %r, exit status %d" % (out, rc)
        rc, out = run([prog, "--help"])
        if rc != 0 or "--version" not in out:
            yield name + " --help", None, "does not name --version"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pkg-config", required=True)
    ap.add_argument("--pc-dir", required=True)
    ap.add_argument("--print-version", required=True)
    ap.add_argument("--python")
    ap.add_argument("--lua", nargs=2, metavar=("LUA", "CPATH_DIR"))
    ap.add_argument("--lua-env", action="append", default=[])
    ap.add_argument("--program", action="append", default=[])
    args = ap.parse_args()

    rc, want = run([args.pkg_config, "--modversion", "aioloop"],
                   env_with(PKG_CONFIG_PATH=args.pc_dir))
    want = want.strip()
    if rc != 0 or not want:
        print("check-version: pkg-config --modversion aioloop failed in %s"
              % args.pc_dir)
        return 1
    print("pkg-config --modversion aioloop: %s" % want)
    bad = 0
    for what, got, note in versions(args):
        ok = got == want
        bad += not ok
        print("  %-34s %-10s %s%s" % (what, got if got is not None else "-",
                                      "ok" if ok else "WRONG",
                                      " (%s)" % note if note else ""))
    if bad:
        print("check-version: %d version(s) disagree with %s" % (bad, want))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
