#!/usr/bin/python3
"""check-symbols.py LIB.so HEADER... - the dynamic symbols LIB.so
defines must be exactly the functions and extern data the public HEADERs
declare (aiol_*,
never an internal aiol__*), and every function those headers declare must
be defined (or be static inline in the header).  Exit 1 with the list of
what is wrong; used by the 'abi' tests for each installed shared library.
"""
import re
import subprocess
import sys


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
    ok = not leaked and not other and not missing
    print("%s: %d exported, %d declared%s" % (
        lib, len(ours), len(want), "" if ok else ": WRONG"))
    for what, names in (("exported but not in the public headers", leaked),
                        ("exported, not ours", other),
                        ("declared but not exported", missing)):
        if names:
            print("  %s (%d): %s" % (what, len(names), " ".join(names)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
