#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check-symbols.py LIB.so HEADER... - the dynamic symbols LIB.so
defines must be exactly the functions and extern data the public HEADERs
declare (aiol_*,
never an internal aiol__*), and every function those headers declare must
be defined (or be static inline in the header).  Every function name
follows the verb table of docs/abi.md (naming_errors() below).  Exit 1
with the list of what is wrong; used by the 'abi' tests for each installed
shared library.
"""
import os
import re
import subprocess
import sys


# The verb table of docs/abi.md, read from the page itself (one source):
# a public function is aiol_<noun>_<verb>[_<variant>], the verb one of
# the table's.
ABI_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "docs", "abi.md")


def verb_table(path=ABI_MD):
    """(VERBS, PHRASES, SET_VARIANTS, WHOLE, FORBIDDEN) from docs/abi.md:
    the verbs of the table's first column (`<attribute>_get` is "get",
    `is_<state>` "is", a word with "_" a whole phrase), what its set row
    lets follow "set" (`_ops`), the (none) row's whole names, and the
    words the paragraph after it says are never used."""
    text = open(path, encoding="utf-8").read()
    m = re.search(r"^\| verb \| meaning \| examples \|\n\|[-|]+\|\n((?:\|.*\n)+)",
                  text, re.M)
    if m is None:
        sys.exit("check-symbols: no verb table in " + path)
    verbs, phrases, set_variants, whole = set(), set(), set(), set()
    for row in m.group(1).splitlines():
        verb, meaning, examples = [c.strip() for c in row.strip("|").split("|")]
        if verb == "(none)":
            whole |= set(re.findall(r"`(aiol_\w+)`", examples))
            continue
        for tok in re.findall(r"`([^`]+)`", verb):
            word = re.sub(r"<[^>]+>_?|_?<[^>]+>", "", tok)
            (phrases if "_" in word else verbs).add(word)
        if "`<attribute>_set`" in verb:
            set_variants |= {t[1:] for t in re.findall(r"`(_\w+)`", meaning)}
    m = re.search(r"^Never used, because the table has the word for them:(.*?)\n\n",
                  text, re.M | re.S)
    if m is None:
        sys.exit("check-symbols: no 'Never used' paragraph in " + path)
    said = re.sub(r"\([^)]*\)", "", m.group(1))
    forbidden = set(re.findall(r"`(\w+)`", said))
    return verbs, phrases, set_variants, whole, forbidden


VERBS, PHRASES, SET_VARIANTS, WHOLE, FORBIDDEN = verb_table()


def naming_errors(functions):
    """Names that break the verb table, each with the reason."""
    errors = []
    for name in sorted(functions):
        if name in WHOLE:
            continue
        rest = name[len("aiol_"):]
        if any(rest.endswith("_" + p) for p in PHRASES):
            continue
        words = rest.split("_")
        bad = FORBIDDEN.intersection(words)
        if bad:
            errors.append("%s: uses %s (docs/abi.md)" % (name, ", ".join(bad)))
            continue
        if "is" in words[1:]:
            i = words.index("is", 1)
            if len(words) - i != 2:
                errors.append("%s: a predicate is <noun>_is_<state>" % name)
            continue
        verbs = [i for i, w in enumerate(words) if i > 0 and w in VERBS]
        if not verbs:
            errors.append("%s: no verb of docs/abi.md's table" % name)
            continue
        v = verbs[-1]
        after = words[v + 1:]
        if words[v] == "get" and after:
            errors.append("%s: an accessor is <noun>_<attribute>_get" % name)
        elif words[v] == "set" and after and "_".join(after) not in SET_VARIANTS:
            errors.append("%s: a setter is <noun>_<attribute>_set" % name)
    return errors


def declared(headers):
    names, inline = set(), set()
    for h in headers:
        text = open(h).read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        for m in re.finditer(r"\b(aiol_[a-z0-9_]+)\s*\(", text):
            names.add(m.group(1))
        # exported data: "extern const aiol_vmm_kvm_ops aiol_vmm_kvm_sys_ops;"
        for m in re.finditer(r"\bextern\s+[^;(]*?\b(aiol_[a-z0-9_]+)\s*;",
                             text):
            names.add(m.group(1))
        for m in re.finditer(r"static\s+inline[^;{]*?\b(aiol_[a-z0-9_]+)\s*\(",
                             text):
            inline.add(m.group(1))
        # function-like macros are not symbols
        for m in re.finditer(r"#\s*define\s+(aiol_[a-z0-9_]+)\s*\(", text):
            inline.add(m.group(1))
        # typedefs of function types: "typedef void aiol_x_fn(...)"
        for m in re.finditer(r"typedef[^;]*?\b(aiol_[a-z0-9_]+)\s*\(", text):
            inline.add(m.group(1))
        for m in re.finditer(r"\(\s*\*\s*(aiol_[a-z0-9_]+)\s*\)", text):
            inline.add(m.group(1))
    return names - inline


def data_names(headers):
    """The extern data the headers declare: not functions, no verb."""
    names = set()
    for h in headers:
        text = re.sub(r"/\*.*?\*/", "", open(h).read(), flags=re.S)
        for m in re.finditer(r"\bextern\s+[^;(]*?\b(aiol_[a-z0-9_]+)\s*;",
                             text):
            names.add(m.group(1))
    return names


def exported(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib],
                         capture_output=True, text=True, check=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtWDdBbRrVvi":
            syms.add(parts[2].split("@")[0])
    return syms


def main():
    lib, headers = sys.argv[1], sys.argv[2:]
    want = declared(headers)
    have = exported(lib)
    ours = {s for s in have if s.startswith("aiol")}
    leaked = sorted(s for s in ours if s not in want)
    other = sorted(s for s in have if not s.startswith("aiol")
                   and s not in ("_init", "_fini", "_edata", "_end",
                                 "__bss_start"))
    missing = sorted(want - have)
    naming = naming_errors(want - data_names(headers))
    ok = not leaked and not other and not missing and not naming
    print("%s: %d exported, %d declared%s" % (
        lib, len(ours), len(want), "" if ok else ": WRONG"))
    for what, names in (("exported but not in the public headers", leaked),
                        ("exported, not ours", other),
                        ("declared but not exported", missing)):
        if names:
            print("  %s (%d): %s" % (what, len(names), " ".join(names)))
    for e in naming:
        print("  name: " + e)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
