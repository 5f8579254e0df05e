# SPDX-License-Identifier: MIT
"""Installs the build into a temporary destdir and imports aioloop there.

Run by meson (test 'python-install'):
    install_check.py BUILD_DIR PURELIB_INSTALL_DIR
The package must import from the interpreter's site directory under the
destdir, with nothing from the build or source tree on sys.path, and run
a loop and an asyncio loop: the extension links libaioloop statically, so it needs no
installed shared library either.
"""
import os
import subprocess
import sys
import tempfile


def main(build, site):
    with tempfile.TemporaryDirectory(prefix="aioloop-install-") as dest:
        subprocess.run(["meson", "install", "-C", build, "--no-rebuild",
                        "--quiet", "--destdir", dest], check=True,
                       stdout=subprocess.DEVNULL)
        where = dest + site
        code = ("import aioloop, sys\n"
                "assert aioloop.__file__.startswith(%r), aioloop.__file__\n"
                "with aioloop.Loop() as loop:\n"
                "    got = []\n"
                "    loop.call_soon(got.append, 1)\n"
                "    loop.poll(blocking=False)\n"
                "    assert got == [1]\n"
                "async def main():\n"
                "    import asyncio\n"
                "    await asyncio.sleep(0)\n"
                "    return type(asyncio.get_running_loop()).__module__\n"
                "assert aioloop.run(main()) == 'aioloop._asyncio'\n"
                "print('installed aioloop OK:', aioloop.__file__)\n" % where)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = where
        subprocess.run([sys.executable, "-c", code], check=True, env=env,
                       cwd=dest)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
