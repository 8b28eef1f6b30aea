"""pytest's hook for the notebooks (you need not read this to learn from them).

Under nbval at the smoke scale with ``TUTORIAL_SOLUTIONS=1`` (``scripts/pytest_all.sh``: CI),
each notebook's worked solutions
run after its own cells, in the same kernel, one test each, named ``Solution: <label>``: the code
of every ``<details>`` block under ``## Solutions`` (``tutorial_lib.ops.solutions``). A solution
that no longer runs with the notebook fails the run. A solution whose code says
``# not run at smoke: <why>`` (it downloads, or asks for sizes far beyond the smoke scale's) is
reported as skipped with that reason. At other scales the notebook's cells alone run (a solution
may train again: too long at classroom)."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import IPyNbCell, IPyNbFile

from tutorial_lib.ops.solutions import solution_code

_collect_cells = IPyNbFile.collect
NOT_RUN = re.compile(r"^# not run at smoke: (.+)$", re.M)


def _collect_cells_then_solutions(self: IPyNbFile):
    cells = list(_collect_cells(self))
    yield from cells
    if os.environ.get("TUTORIAL_SCALE") != "smoke" or os.environ.get("TUTORIAL_SOLUTIONS") != "1":
        return
    for n, (label, code) in enumerate(solution_code(Path(self.fspath)).items(), start=len(cells)):
        item = IPyNbCell.from_parent(self, name=f"Solution: {label}", cell_num=n,
                                     cell=nbformat.v4.new_code_cell(code),
                                     options=defaultdict(bool, check=False))
        if why := NOT_RUN.search(code):
            item.add_marker(pytest.mark.skip(reason=f"solution not run at smoke: {why.group(1)}"))
        yield item


IPyNbFile.collect = _collect_cells_then_solutions
