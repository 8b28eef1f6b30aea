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


class LearnerRun:
    """Notebook ``stem``'s self-check run as the learner meets it: the check cell executed with the
    stub (which must be reported as not written, without raising), then the solution (which must
    pass). ``mine``: the learner's function's name; ``inputs``: the cell's input maker;
    ``reference``: the function checked against, or the name of one the cell defines; ``wrap``: the
    name of the cell's adapter (e.g. a seeded or a gradient-reading wrapper) put around every
    function checked, the reference included. ``check(fn)`` then checks any other answer the same
    way, and ``fails(wrong)`` asserts that each of several plausible mistakes is caught."""

    def __init__(self, stem: str, ns: dict, mine: str, inputs: str, reference, *,
                 wrap: str | None = None, n: int | None = None):
        from tutorial_lib import selfcheck

        self._selfcheck, self.ns = selfcheck, ns
        cell, solution = self_check(stem)
        exec(cell, ns)  # as the learner first runs it: nothing raises
        self._wrap = ns[wrap] if wrap else (lambda fn: fn)
        self._n, self._inputs = n, inputs
        self.reference = self._wrap(ns[reference] if isinstance(reference, str) else reference)
        assert "not written yet" in self.check(ns[mine]).message, f"{stem}: the stub is not reported"
        exec(solution, ns)
        self.mine = ns[mine]
        assert self.check(self.mine), f"{stem}: the solution does not pass"

    def cases(self) -> list:
        kw = {} if self._n is None else {"n": self._n}
        return self._selfcheck.cases(self.ns[self._inputs], **kw)

    def check(self, fn):
        return self._selfcheck.check(self._wrap(fn), self.reference, self.cases())

    def fails(self, wrong) -> None:
        """Each of ``wrong`` (name -> function, or functions named by ``__name__``) is caught."""
        items = wrong.items() if isinstance(wrong, dict) else ((fn.__name__, fn) for fn in wrong)
        for name, fn in items:
            assert "largest difference" in self.check(fn).message, name
