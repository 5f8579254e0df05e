#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Holds every fd monitor (libaioloop/fdmon-*.c and the files a monitor
split into, OWN_HEADERS below) to what fdmon.h names.

libaioloop/fdmon.h says that it and internal.h are an fd monitor's whole
world, and lists what of the loop a monitor may use.  This check makes
the list true:

  - a loop field a monitor reads or writes (``loop->X``, or
    ``loop->X.Y`` for a member of a struct field) must be named as
    ``loop->X`` or ``loop->X.Y`` in one of fdmon.h's comments;
  - an internal name a monitor uses (``aiol__*`` or ``AIOL__*``) must
    appear in fdmon.h, in a comment or a declaration, or in the
    monitor's own private header (OWN_HEADERS below); ``AIOL__EV_*`` in
    fdmon.h allows every name with that prefix;
  - of libaioloop's private headers a monitor includes only fdmon.h and
    its own.

Comments in the monitor are ignored: only code counts.  Usage:
check-fdmon.py [SOURCE_ROOT]; exits 1 listing every violation.
"""
import os
import re
import sys

# A monitor split into several files shares a private header of its own;
# every file of the monitor is held to the same list.
OWN_HEADERS = {
    "fdmon-epoll.c": ["epoll-priv.h"],
    "epoll-removal.c": ["epoll-priv.h"],
    "fdmon-io_uring.c": ["uring-priv.h"],
    "uring-ring.c": ["uring-priv.h"],
    "uring-req.c": ["uring-priv.h"],
}

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
FIELD = re.compile(r"\bloop->([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?")
NAME = re.compile(r"\b(?:aiol__|AIOL__)[A-Za-z0-9_]*\*?")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def names_in(text):
    """Exact names and prefixes (from "AIOL__EV_*") mentioned in @text."""
    exact, prefixes = set(), set()
    for tok in NAME.findall(text):
        if tok.endswith("*"):
            prefixes.add(tok[:-1])
        else:
            exact.add(tok)
    return exact, prefixes


def fields_in(comments):
    allowed = set()
    for m in FIELD.finditer(comments):
        allowed.add(m.group(1) + ("." + m.group(2) if m.group(2) else ""))
    return allowed


def check(root):
    lib = os.path.join(root, "libaioloop")
    fdmon = read(os.path.join(lib, "fdmon.h"))
    comments = "\n".join(COMMENT.findall(fdmon))
    allowed_fields = fields_in(comments)
    exact, prefixes = names_in(fdmon)
    errors = []
    monitors = sorted(set(f for f in os.listdir(lib)
                          if f.startswith("fdmon-") and f.endswith(".c")) |
                      set(OWN_HEADERS))
    if not monitors:
        return ["no libaioloop/fdmon-*.c found under " + root]
    for mon in monitors:
        own = OWN_HEADERS.get(mon, [])
        m_exact, m_prefixes = set(exact), set(prefixes)
        for h in own:
            e, p = names_in(read(os.path.join(lib, h)))
            m_exact |= e
            m_prefixes |= p
        src = read(os.path.join(lib, mon))
        # Comments become as many newlines, so line numbers stay right.
        nocomment = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), src)
        code = STRING.sub('""', nocomment)
        for inc in INCLUDE.findall(nocomment):
            if inc.startswith("aioloop/"):
                continue  # the public headers
            if inc != "fdmon.h" and inc not in own:
                errors.append(f"{mon}: includes {inc}; a monitor includes "
                              "fdmon.h (and only its own private header)")
        for lineno, line in enumerate(code.split("\n"), 1):
            for m in FIELD.finditer(line):
                field, member = m.group(1), m.group(2)
                full = field + ("." + member if member else "")
                if full not in allowed_fields and field not in allowed_fields:
                    errors.append(f"{mon}:{lineno}: loop->{full} is not "
                                  "named in fdmon.h")
            for tok in NAME.findall(line):
                if tok in m_exact or any(tok.startswith(p) for p in m_prefixes):
                    continue
                errors.append(f"{mon}:{lineno}: {tok} is not named in "
                              "fdmon.h" + (" or " + ", ".join(own) if own else ""))
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..")
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check-fdmon: {len(errors)} use(s) outside fdmon.h's list")
        return 1
    print("check-fdmon: every fd monitor stays within fdmon.h")
    return 0


if __name__ == "__main__":
    sys.exit(main())
