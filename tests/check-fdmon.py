#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Holds every fd monitor (libaioloop/fdmon-*.c and every file that
includes one of their private headers: the files a monitor is split into)
to what fdmon.h names, and its files to calling one way.

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
    its own;
  - no two files of one monitor call each other (``aiol__*`` functions one
    defines and the other calls, both ways): the files of a monitor call
    one way, as its private header lists them.

Comments in the monitor are ignored: only code counts.  Usage:
check-fdmon.py [SOURCE_ROOT]; exits 1 listing every violation.
"""
import os
import re
import sys

# A monitor split into several files shares a private header of its own
# (a header a fdmon-*.c includes besides fdmon.h); every file that
# includes it is one of the monitor's files, held to the same list.

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
FIELD = re.compile(r"\bloop->([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?")
NAME = re.compile(r"\b(?:aiol__|AIOL__)[A-Za-z0-9_]*\*?")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DEFINED = re.compile(r"^(?!static)[A-Za-z_][\w \*]*?\b(aiol__\w+)\s*\([^;{]*\)\s*\{",
                     re.M)
CALLED = re.compile(r"\b(aiol__\w+)\s*\(")


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


def one_way(lib, private, own_of):
    """Two files of one monitor (sharing its private header) that call
    each other's aiol__ functions."""
    errors = []
    for header in sorted(private):
        files = [f for f, own in own_of.items() if header in own]
        code = {f: COMMENT.sub("", read(os.path.join(lib, f))) for f in files}
        home = {name: f for f in files for name in DEFINED.findall(code[f])}
        calls = {}
        for f in files:
            for name in set(CALLED.findall(code[f])):
                if home.get(name, f) != f:
                    calls.setdefault((f, home[name]), set()).add(name)
        for (a, b), names in sorted(calls.items()):
            if a < b and (b, a) in calls:
                errors.append(f"{a} and {b} call each other ({header}): "
                              f"{a} calls {', '.join(sorted(names))}; {b} "
                              f"calls {', '.join(sorted(calls[(b, a)]))}")
    return errors


def check(root):
    lib = os.path.join(root, "libaioloop")
    fdmon = read(os.path.join(lib, "fdmon.h"))
    comments = "\n".join(COMMENT.findall(fdmon))
    allowed_fields = fields_in(comments)
    exact, prefixes = names_in(fdmon)
    errors = []
    sources = sorted(f for f in os.listdir(lib) if f.endswith(".c"))
    mains = [f for f in sources if f.startswith("fdmon-")]
    if not mains:
        return ["no libaioloop/fdmon-*.c found under " + root]
    private = {inc for f in mains for inc in
               INCLUDE.findall(COMMENT.sub("", read(os.path.join(lib, f))))
               if inc.endswith("-priv.h")}
    own_of = {}
    for f in sources:
        incs = INCLUDE.findall(COMMENT.sub("", read(os.path.join(lib, f))))
        own = [h for h in incs if h in private]
        if own or f in mains:
            own_of[f] = own
    monitors = sorted(own_of)
    errors += one_way(lib, private, own_of)
    for mon in monitors:
        own = own_of[mon]
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
