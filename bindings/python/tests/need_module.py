# SPDX-License-Identifier: MIT
"""need_module.py MODULE ARGS...

Runs this interpreter again with ARGS (python ARGS...) when MODULE can be
imported here; when it cannot, says so and exits 77, which meson reports
as SKIP.  The meson tests that need pytest or mypy run through it, so a
machine without them shows the suites skipped, not absent.
"""
import importlib
import os
import sys


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    module = sys.argv[1]
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise  # (there, but broken: a failure)
        print("SKIP: no module %s for %s (Python %s)" % (
            module, sys.executable, sys.version.split()[0]))
        return 77
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable] + sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
