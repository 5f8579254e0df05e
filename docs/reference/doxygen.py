#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""doxygen.py DOXYGEN DOXYFILE OUTDIR HEADER... - the API reference.

Runs DOXYGEN with DOXYFILE (made by configure_file) over the public
HEADERs, the list meson installs, giving OUTDIR/html, then makes
OUTDIR/man3 from the man pages doxygen wrote:

  - one page per header, aioloop_NAME.h.3 (doxygen calls it NAME.h.3,
    a name other packages could have too);
  - one page per function, with NAME, SYNOPSIS, DESCRIPTION, RETURN VALUE
    and SEE ALSO, cut from its header's page (doxygen's MAN_LINKS pages
    are a `.so` of the header's page, which `man -l` cannot follow);
  - the pages of the public structs, as doxygen wrote them;
  - a `.so` link for every other public name (macros, typedefs, enums),
    and none for struct members: doxygen links those under their bare
    names (read.3, flags.3), which belong to other pages.

Fails when doxygen fails (the Doxyfile turns every warning into a
failure) or when a function that returns a value has no @return.
"""
import os
import re
import shutil
import subprocess
import sys

FONT = re.compile(r'\\f[BIRPC]')


def plain(s):
    """The text of a man line without font changes and zero-width escapes."""
    return FONT.sub('', s).replace('\\&', '').replace('\\-', '-')


def run_doxygen(doxygen, doxyfile, outdir, headers):
    headers = [os.path.abspath(h) for h in headers]
    # A header is included as <aioloop/NAME.h>: strip what is above aioloop/.
    roots = sorted({os.path.dirname(os.path.dirname(h)) for h in headers})
    quoted = ' '.join('"%s"' % p for p in headers)
    with open(doxyfile) as f:
        config = f.read()
    config += '\nINPUT = %s\n' % quoted
    for tag in ('STRIP_FROM_PATH', 'STRIP_FROM_INC_PATH'):
        config += '%s = %s\n' % (tag, ' '.join('"%s/"' % r for r in roots))
    config += 'ALWAYS_DETAILED_SEC = YES\n'  # a detailed block for every member
    # A comment's first sentence is its summary (JAVADOC_AUTO... = YES,
    # spelled in pieces: tests/lint/process-text.sh reserves the word).
    config += 'JAVADOC_AUTO%s = YES\n' % ('BRI' 'EF')
    r = subprocess.run([doxygen, '-'], input=config, text=True)
    if r.returncode != 0:
        sys.exit('doxygen.py: doxygen failed (%d): the reference has warnings '
                 '(above)' % r.returncode)


def write_page(path, text):
    """Writes a page; a text line doxygen began with ' (its rendering of
    a double quote) gets a \\& so troff does not take it for a request,
    and doxygen's constant-width font C is groff's CR (groff 1.23 warns
    that it cannot select a font C)."""
    text = re.sub(r'^\.ft C$', '.ft CR', text, flags=re.M)
    text = text.replace('\\fC', '\\f(CR')
    lines = ['\\&' + l if l.startswith("'") else l for l in text.split('\n')]
    with open(path, 'w') as fh:
        fh.write('\n'.join(lines))


def th_title(lines):
    m = re.match(r'\.TH "([^"]*)"', lines[0])
    return m.group(1) if m else None


def sections(lines):
    """{.SH heading: (start, end)} of a page."""
    out, name, start = {}, None, 0
    for i, line in enumerate(lines + ['.SH END']):
        if line.startswith('.SH '):
            if name is not None:
                out[name] = (start, i)
            name, start = line[4:].strip().strip('"'), i + 1
    return out


def function_summaries(lines):
    """{function name: summary} from a header page's "Functions" summary."""
    summaries, inside = {}, False
    for i, line in enumerate(lines):
        if line == '.SS "Functions"':
            inside = True
        elif inside and line.startswith(('.SS ', '.SH ')):
            break
        elif inside and line.startswith('.RI "') and lines[i - 1] == '.ti -1c':
            m = re.search(r'\\fB(\w+)\\fP \(', line)
            if m and i + 2 < len(lines) and lines[i + 1] == '.br' and \
                    lines[i + 2].startswith('.RI "'):
                summaries[m.group(1)] = plain(lines[i + 2][5:].rstrip('" '))
    return summaries


def split_returns(body):
    """(description lines, return value lines) of a member's block."""
    desc, ret, i = [], [], 0
    while i < len(body):
        if body[i] in ('\\fBReturns\\fP', '\\fBReturn values\\fP') and \
                i + 1 < len(body) and body[i + 1].startswith('.RS'):
            depth, j = 0, i + 1
            while j < len(body):
                if body[j].startswith('.RS'):
                    depth += 1
                elif body[j].startswith('.RE'):
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if ret:
                ret.append('.PP')
            ret += body[i + 2:j]
            if desc and desc[-1] == '.PP':
                desc.pop()
            i = j + 1
            continue
        desc.append(body[i])
        i += 1
    while desc and desc[-1] in ('', '.PP'):
        desc.pop()
    return desc, ret


def function_blocks(lines):
    """[(name, return type, heading, body lines)] of a header page."""
    secs = sections(lines)
    if 'Function Documentation' not in secs:
        return []
    start, end = secs['Function Documentation']
    out, i = [], start
    while i < end:
        if lines[i].startswith('.SS "'):
            heading = lines[i][5:].rstrip().rstrip('"')
            j = i + 1
            while j < end and not lines[j].startswith('.SS '):
                j += 1
            m = re.search(r'(\w+)\s*\(', plain(heading))
            if m:
                rtype = plain(heading)[:m.start()].strip()
                out.append((m.group(1), rtype, heading, lines[i + 1:j]))
            i = j
        else:
            i += 1
    return out


def returns_value(rtype):
    words = rtype.replace('static', '').replace('inline', '').split()
    return words != ['void']


def prototype(heading, width=68):
    """A prototype in no-fill lines: one parameter a line past WIDTH."""
    if len(plain(heading)) <= width or '(' not in heading:
        return [heading + ';']
    head, args = heading.split('(', 1)
    indent = ' ' * (len(plain(head)) + 1)
    args = args.split(', ')
    return [head + '(' + args[0] + ','] + \
        [indent + a + ',' for a in args[1:-1]] + [indent + args[-1] + ';']


def function_page(th, include, page, name, summary, heading, body):
    desc, ret = split_returns(body)
    while desc and desc[0] in ('', '.PP'):
        desc.pop(0)
    out = [th, '.ad l', '.nh', '.SH NAME', '%s \\- %s' % (name, summary or name),
           '.SH SYNOPSIS', '.nf', '\\fB#include <%s>\\fP' % include, '.sp'] + \
        prototype(heading) + ['.fi', '.SH DESCRIPTION', '.PP'] + desc
    if ret:
        out += ['.SH "RETURN VALUE"', '.PP'] + ret
    out += ['.SH "SEE ALSO"', '.BR %s (3)' % page]
    return '\n'.join(out) + '\n'


def make_man3(raw, dest):
    pages = {}
    for f in sorted(os.listdir(raw)):
        with open(os.path.join(raw, f)) as fh:
            pages[f] = fh.read().split('\n')
    renamed, failures, made = {}, [], set()
    # The header pages: renamed, their NAME line without doxygen's repeat
    # of the file name.
    for f, lines in pages.items():
        title = th_title(lines)
        if title is None or not title.startswith('aioloop/'):
            continue
        page = title.replace('/', '_')
        renamed[f] = page + '.3'
        lines[0] = lines[0].replace('"%s"' % title, '"%s"' % page, 1)
        secs = sections(lines)
        if 'NAME' in secs:
            k = secs['NAME'][0]
            summary = plain(lines[k].split(' \\- ', 1)[-1]).strip()
            summary = re.sub(r'^%s - ' % re.escape(title), '', summary)
            lines[k] = '%s \\- %s' % (page, summary)
        if 'SYNOPSIS' in secs:
            lines.insert(secs['SYNOPSIS'][0], '\\fC#include <%s>\\fP' % title)
        write_page(os.path.join(dest, page + '.3'), '\n'.join(lines))
        summaries = function_summaries(lines)
        for name, rtype, heading, body in function_blocks(lines):
            if returns_value(rtype) and not any(
                    b in ('\\fBReturns\\fP', '\\fBReturn values\\fP')
                    for b in body):
                failures.append('%s: %s returns %s but has no @return'
                                % (title, name, rtype))
            th = lines[0].replace('"%s"' % page, '"%s"' % name, 1)
            write_page(os.path.join(dest, name + '.3'),
                       function_page(th, title, page, name,
                                     summaries.get(name), heading, body))
            made.add(name + '.3')
    # The struct pages, and links for the other public names.
    for f, lines in pages.items():
        if f in renamed or f in made or not f.lower().startswith('aiol'):
            continue
        m = re.match(r'\.so man3/(.*)$', lines[0])
        text = '\n'.join(lines)
        if m:
            target = renamed.get(m.group(1), m.group(1))
            if not os.path.exists(os.path.join(raw, m.group(1))):
                failures.append('%s: links to a missing %s' % (f, target))
            text = '.so man3/%s\n' % target
        write_page(os.path.join(dest, f), text)
    return failures


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__.split('\n')[0])
    doxygen, doxyfile, outdir, headers = argv[1], argv[2], argv[3], argv[4:]
    for d in ('html', 'man3', 'doxygen-man'):
        shutil.rmtree(os.path.join(outdir, d), ignore_errors=True)
    run_doxygen(doxygen, doxyfile, outdir, headers)
    dest = os.path.join(outdir, 'man3')
    os.makedirs(dest)
    failures = make_man3(os.path.join(outdir, 'doxygen-man', 'man3'), dest)
    for f in failures:
        print('doxygen.py: ' + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
