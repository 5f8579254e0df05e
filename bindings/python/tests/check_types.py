# SPDX-License-Identifier: MIT
"""The package's type information against mypy --strict and the runtime.

    check_types.py DOCS

With PYTHONPATH at the package (the build tree, or an installed copy):
- mypy --strict passes on types_usage.py (every public name) and on each
  ```python block of DOCS, so the examples a user copies type-check;
- mypy's stubtest finds the stubs (__init__.pyi) true to the runtime:
  every name, signature and class the stubs declare exists as declared;
- types_usage.py runs, so what it type-checks is also what works.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main(docs):
    with open(docs) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    if not blocks:
        raise SystemExit("check_types: no examples in %s" % docs)
    with tempfile.TemporaryDirectory(prefix="aioloop-types-") as tmp:
        files = [os.path.join(HERE, "types_usage.py")]
        for n, code in enumerate(blocks):
            path = os.path.join(tmp, "doc_example_%d.py" % n)
            with open(path, "w") as f:
                f.write(code)
            files.append(path)
        env = dict(os.environ, MYPY_CACHE_DIR=os.path.join(tmp, "cache"))
        cmd = [sys.executable, "-m", "mypy", "--strict",
               "--no-error-summary", "--python-version", "3.11"]
        rc = subprocess.call(cmd + files, env=env)
        rc |= subprocess.call([sys.executable, "-m", "mypy.stubtest",
                               "aioloop"], env=env)
        rc |= subprocess.call([sys.executable, files[0]], env=env)
    print("check_types: %s (%d doc examples)" % ("FAIL" if rc else "ok",
                                                  len(blocks)))
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
