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


def stubtest_flags(env):
    """PEP 800's @disjoint_base (for Handle, a C type others derive from)
    cannot be written in stubs that bookworm's and trixie's mypy read
    (their typing_extensions has no such name): the stubtest releases that
    check it are told not to."""
    out = subprocess.run([sys.executable, "-m", "mypy.stubtest", "--help"],
                         env=env, capture_output=True, text=True).stdout
    return ["--ignore-disjoint-bases"] if "--ignore-disjoint-bases" in out \
        else []


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
                               "aioloop"] + stubtest_flags(env), env=env)
        rc |= subprocess.call([sys.executable, files[0]], env=env)
    print("check_types: %s (%d doc examples)" % ("FAIL" if rc else "ok",
                                                  len(blocks)))
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
