"""A notebook's self-check as the learner meets it (issue 38): the code cells of its
``## Self-check`` section (the stub, the reference, the random inputs and the check) and the code
of its ``<details><summary>Self-check</summary>`` solution under ``## Solutions``. The chapter tests
run them: the stub is reported without raising, the solution passes, a wrong answer fails."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
HEADING = re.compile(r"^## Self-check", re.M)
SOLUTION = re.compile(r"<summary>Self-check</summary>\s*```python\n(.*?)```", re.S)


def self_check(stem: str) -> tuple[str, str]:
    """(the self-check section's code cells joined, the solution's code) of notebook ``stem``."""
    cells = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4).cells
    start = next(i for i, c in enumerate(cells)  # its own cell, or the end of "## Try this"'s
                 if c.cell_type == "markdown" and HEADING.search(c.source))
    end = next(i for i, c in enumerate(cells)
               if i > start and c.cell_type == "markdown" and c.source.startswith("## "))
    code = "\n\n".join(c.source for c in cells[start:end] if c.cell_type == "code")
    solution = SOLUTION.search(cells[end].source)
    assert cells[end].source.startswith("## Solutions") and solution, f"{stem}: no Self-check solution"
    return code, solution.group(1)
