"""The notebooks' exercises and worked solutions as data: what ``tests/test_exercises.py`` checks
and what ``notebooks/conftest.py`` runs at the smoke scale after each notebook's own cells.

A notebook's exercises are the numbered items under its ``## Try this`` heading; its solutions are
the ``<details><summary>label</summary> … </details>`` blocks under ``## Solutions``, each with its
code in ```` ```python ```` fences."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

ITEM = re.compile(r"^(\d+)\. (.*?)(?=^\d+\. |\Z)", re.M | re.S)
SUMMARY = re.compile(r"<details><summary>(.*?)</summary>(.*?)</details>", re.S)
CODE = re.compile(r"```python\n(.*?)```", re.S)


def markdown(path: Path) -> str:
    """Every markdown cell of the notebook at ``path``, joined."""
    cells = nbformat.read(path, as_version=4).cells
    return "\n\n".join(c.source for c in cells if c.cell_type == "markdown")


def section(text: str, title: str) -> str:
    """The part of ``text`` under ``## title``, up to the next level-2 heading ("" if none)."""
    start = text.find(f"## {title}")
    if start < 0:
        return ""
    rest = text[start + len(title) + 3:]
    nxt = re.search(r"^## ", rest, re.M)
    return rest[: nxt.start()] if nxt else rest


def exercises(path: Path) -> dict[int, str]:
    """``{number: text}`` of the items under ``## Try this``."""
    return {int(n): body for n, body in ITEM.findall(section(markdown(path), "Try this"))}


def solutions(path: Path) -> dict[str, str]:
    """``{summary label: body}`` of the ``<details>`` blocks under ``## Solutions``."""
    return {label.strip(): body for label, body in SUMMARY.findall(section(markdown(path), "Solutions"))}


def solution_code(path: Path) -> dict[str, str]:
    """``{summary label: code}``: each solution's ``python`` blocks joined, in order (solutions
    without code left out)."""
    code = {label: "\n".join(CODE.findall(body)) for label, body in solutions(path).items()}
    return {label: text for label, text in code.items() if text.strip()}
