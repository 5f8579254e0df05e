#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Holds docs/design.md's map to libaioloop/: every file under
libaioloop/ has exactly one line in the map's code block (its path
relative to libaioloop/, first on the line), and every line there names
a file that exists.  Usage: check-map.py [SOURCE_ROOT]; exits 1 listing
every difference."""
import os
import re
import sys


def map_lines(design):
    text = open(design, encoding="utf-8").read()
    m = re.search(r"^## Map\n(.*?)^## ", text, re.S | re.M)
    if m is None:
        return None
    block = re.search(r"^```\n(.*?)^```", m.group(1), re.S | re.M)
    if block is None:
        return None
    names = []
    for line in block.group(1).splitlines():
        # a file line: indented, then a name with a dot and a description
        m = re.match(r"^\s{3}(\S+\.\w+)\s{2,}\S", line)
        if m:
            names.append(m.group(1))
    return names


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    lib = os.path.join(root, "libaioloop")
    files = sorted(os.path.relpath(os.path.join(d, f), lib)
                   for d, _, fs in os.walk(lib) for f in fs)
    names = map_lines(os.path.join(root, "docs", "design.md"))
    if names is None:
        print("check-map: docs/design.md has no '## Map' code block")
        return 1
    errors = [f"libaioloop/{f}: not in docs/design.md's map"
              for f in files if f not in names]
    errors += [f"docs/design.md's map: {n} is not a file of libaioloop/"
               for n in sorted(set(names)) if n not in files]
    errors += [f"docs/design.md's map: {n} has {names.count(n)} lines"
               for n in sorted(set(names)) if names.count(n) > 1]
    for e in errors:
        print(e)
    if errors:
        return 1
    print(f"check-map: the {len(files)} files of libaioloop/ are each on one "
          "line of docs/design.md's map")
    return 0


if __name__ == "__main__":
    sys.exit(main())
