# SPDX-License-Identifier: MIT
"""Runs every ```python block of docs/python.md, each in a fresh namespace."""
import os
import re

import pytest

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs",
                   "python.md")


def blocks():
    with open(DOC) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_doc_has_examples():
    assert len(blocks()) >= 5


@pytest.mark.parametrize("n", range(len(blocks())))
def test_doc_example(n):
    code = blocks()[n]
    exec(compile(code, "docs/python.md example %d" % n, "exec"), {})
