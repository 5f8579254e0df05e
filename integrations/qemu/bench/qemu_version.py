# SPDX-License-Identifier: MIT
"""The version of a QEMU binary (qemu-img, qemu-system-*), for the scripts
whose checks and tables differ between QEMU 7.2 and 10.2."""
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
