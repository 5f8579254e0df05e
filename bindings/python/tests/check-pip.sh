#!/bin/sh
# SPDX-License-Identifier: MIT
# check-pip.sh [DIR]: installs the Python package the way a Python user
# does, from pyproject.toml (meson-python): a venv in DIR (default
# build-pip) that sees Debian's cffi, pytest, mypy and meson-python
# (--system-site-packages), `pip install --no-build-isolation .` from the
# repository root, then with that interpreter, from outside the tree:
# the import comes from the venv, __version__ is the project's version,
# the binding's suite passes, and so do its type checks.
set -eu
src=$(cd "$(dirname "$0")/../../.." && pwd)
dir=$(realpath -m "${1:-$src/build-pip}")
rm -rf "$dir"
mkdir -p "$dir"
/usr/bin/python3 -m venv --system-site-packages "$dir/venv"
py=$dir/venv/bin/python
# meson-python 0.12 writes its native file into the source tree and, when
# it is there unchanged, reconfigures builddir instead of setting it up: a
# second run, whose builddir is new, would fail.  It leaves with this run.
native=$src/.mesonpy-native-file.ini
rm -f "$native"
trap 'rm -f "$native"' EXIT
# (--no-index: everything comes from Debian; builddir keeps meson-python's
# build out of the source tree)
(cd "$src" && "$py" -m pip install --quiet --no-index --no-build-isolation \
    --config-settings=builddir="$dir/mesonpy" .)
rm -f "$native"
version=$(sed -n "s/^ *version *: *'\([0-9.]*\)'.*/\1/p" "$src/meson.build" | head -1)
cd "$dir"
"$py" - "$dir/venv" "$version" <<'PY'
import sys
import aioloop
assert aioloop.__file__.startswith(sys.argv[1]), aioloop.__file__
assert aioloop.__version__ == sys.argv[2], (aioloop.__version__, sys.argv[2])
print("check-pip: aioloop %s from %s" % (aioloop.__version__, aioloop.__file__))
PY
env -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 "$py" -X dev -m pytest -q \
    -p no:cacheprovider "$src/bindings/python/tests"
env -u PYTHONPATH "$py" "$src/bindings/python/tests/check_types.py" \
    "$src/docs/python.md"
echo "check-pip: pip install, the suite and the type checks passed"
