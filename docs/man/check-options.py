#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check-options.py PROGRAM MANPAGE - a man page and --help agree.

Runs PROGRAM --help (it must exit 0) and fails, listing them, when an
option the help prints is not an item of MANPAGE's OPTIONS section, or
when a long option the OPTIONS section documents is not in the help
(--help itself excepted: a usage text need not name it).  MANPAGE is
troff source with man(7) macros.
"""
import re
import subprocess
import sys

OPTION = re.compile(r'(?<![\w-])(--?[A-Za-z0-9][-A-Za-z0-9_]*)')


def man_text(line):
    """A troff line as the reader sees its words."""
    line = re.sub(r'\\f(\[[^]]*\]|\(..|.)', '', line)
    return line.replace('\\-', '-').replace('\\&', '').replace('\\e', '\\')


def documented(manpage):
    """The options that head an item (.TP, .IP) of the OPTIONS section."""
    with open(manpage) as f:
        lines = f.read().split('\n')
    found, section, tag_next = set(), None, False
    for line in lines:
        if line.startswith('.\\"'):
            continue
        if line.startswith('.SH'):
            section = line[3:].strip().strip('"').upper()
            continue
        if section != 'OPTIONS':
            continue
        if line.startswith('.TP'):
            tag_next = True
            continue
        if line.startswith('.IP '):
            found.update(OPTION.findall(man_text(line[4:])))
            continue
        if tag_next:
            found.update(OPTION.findall(man_text(line)))
            tag_next = False
    return found


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.split('\n')[0])
    program, manpage = argv[1], argv[2]
    r = subprocess.run([program, '--help'], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        sys.exit('check-options: %s --help exited %d' % (program, r.returncode))
    helped = set(OPTION.findall(r.stdout))
    if not helped:
        sys.exit('check-options: %s --help prints no option' % program)
    man = documented(manpage)
    bad = ['%s: %s is in --help but not in OPTIONS' % (manpage, o)
           for o in sorted(helped - man)]
    bad += ['%s: %s is in OPTIONS but not in --help' % (manpage, o)
            for o in sorted(man - helped)
            if o.startswith('--') and o != '--help']
    for b in bad:
        print('check-options: ' + b, file=sys.stderr)
    if bad:
        return 1
    print('check-options: %d options of %s --help documented in %s'
          % (len(helped), program, manpage))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
