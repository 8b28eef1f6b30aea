"""Markdown tables without their padding: what :mod:`.report` writes into ``RESULTS.md``."""

from __future__ import annotations

import re

_PIPE = re.compile(r"(?<!\\)\|")  # a cell border: a pipe not escaped
_RULE = re.compile(r"(:?)-+(:?)")  # a cell of the delimiter row: its alignment colons


def compact_table_row(line: str, delimiter: bool = False) -> str:
    """A markdown table row without the padding that aligns its columns in the source
    (``pandas.to_markdown`` pads every cell to its column's widest): the same cells and, in the
    ``delimiter`` row (a table's second), the same alignment colons, so it renders the same, in a
    fraction of the bytes (the padding was half of RESULTS.md, issue 63).

    >>> compact_table_row("| a     |   b | -   |")
    '| a | b | - |'
    >>> compact_table_row("|:------|----:|-----|", delimiter=True)
    '| :--- | ---: | --- |'
    """
    cells = [c.strip() for c in _PIPE.split(line.strip())[1:-1]]
    if delimiter and all(_RULE.fullmatch(c) for c in cells):
        cells = [_RULE.sub(r"\1---\2", c) for c in cells]
    return "| " + " | ".join(cells) + " |"


def compact_tables(text: str) -> str:
    """``text`` with every markdown table row compacted (:func:`compact_table_row`); fenced code
    blocks are left as they are."""
    out, fenced, row = [], False, 0
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        stripped = line.strip()
        if not fenced and len(stripped) > 1 and stripped[0] == "|" and stripped[-1] == "|":
            out.append(compact_table_row(line, delimiter=row == 1))
            row += 1
        else:
            out.append(line)
            row = 0
    return "\n".join(out)
