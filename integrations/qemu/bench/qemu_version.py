# SPDX-License-Identifier: MIT
"""The version of a QEMU binary (qemu-img, qemu-system-*), for the scripts
whose checks depend on the QEMU version (Debian's qemu-system-x86 on
bookworm is 7.2; the fork is 10.2)."""
import re
import subprocess
import sys


def qemu_version(binary):
    """(major, minor) from `binary --version`; exits if it names none."""
    out = subprocess.run([binary, "--version"], check=True,
                         capture_output=True, text=True).stdout
    m = re.search(r"version (\d+)\.(\d+)", out)
    if not m:
        sys.exit("%s --version names no version: %r" % (binary, out[:200]))
    return int(m.group(1)), int(m.group(2))
