"""Show the library's own code in a notebook, so there is one copy of each method and readers see it.

``show.source(adapters.Adapter)`` displays the class's source with syntax highlighting (and as
plain text where HTML is not rendered); ``show.source(fn, lines=(3, 20))`` only those lines of it.
It displays at once, wherever it stands in a cell (a display object returned by a call that is
not the cell's last expression would be dropped silently: tests/test_show.py checks every
notebook's outputs for it).
"""

from __future__ import annotations

import inspect
import textwrap

from IPython.display import Code, display


def source_text(obj: object, lines: tuple[int, int] | None = None) -> str:
    """The source of a function, class or method (dedented); ``lines``: 1-based, inclusive."""
    text = textwrap.dedent(inspect.getsource(obj))
    if lines is not None:
        first, last = lines
        text = "\n".join(text.splitlines()[first - 1: last])
    return text.rstrip() + "\n"


def span(obj: object, first: str, last: str) -> tuple[int, int]:
    """The 1-based lines of ``obj``'s source from the first line containing ``first`` to the next
    containing ``last`` (inclusive): a nested function, shown with :func:`source`'s ``lines``.
    A marker not found is an error that names it (the source changed: update the call)."""
    text = source_text(obj).splitlines()
    start = next((i for i, line in enumerate(text, 1) if first in line), None)
    end = None if start is None else next(
        (i for i, line in enumerate(text, 1) if i >= start and last in line), None)
    if start is None or end is None:
        raise ValueError(f"{first if start is None else last!r} is not in the source of {header(obj)}")
    return start, end


def header(obj: object) -> str:
    """The first line shown above ``obj``'s source: ``# module.qualname``."""
    module = inspect.getmodule(obj)
    return f"# {module.__name__}.{getattr(obj, '__qualname__', '')}" if module else ""


def code(obj: object, lines: tuple[int, int] | None = None) -> Code:
    """The source of ``obj`` as a highlighted code block, with the module it comes from."""
    first = header(obj)
    return Code((first + "\n" if first else "") + source_text(obj, lines), language="python")


def source(obj: object, lines: tuple[int, int] | None = None) -> None:
    """Display :func:`code` of ``obj`` now (anywhere in a cell)."""
    display(code(obj, lines))
