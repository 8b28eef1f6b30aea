"""Show the library's own code in a notebook, so there is one copy of each method and readers see it.

``show.source(adapters.Adapter)`` displays the class's source with syntax highlighting (and as
plain text where HTML is not rendered); ``show.source(fn, lines=(3, 20))`` only those lines of it.
"""

from __future__ import annotations

import inspect
import textwrap

from IPython.display import Code


def source_text(obj: object, lines: tuple[int, int] | None = None) -> str:
    """The source of a function, class or method (dedented); ``lines``: 1-based, inclusive."""
    text = textwrap.dedent(inspect.getsource(obj))
    if lines is not None:
        first, last = lines
        text = "\n".join(text.splitlines()[first - 1: last])
    return text.rstrip() + "\n"


def source(obj: object, lines: tuple[int, int] | None = None) -> Code:
    """The source of ``obj`` as a highlighted code block, with the module it comes from."""
    module = inspect.getmodule(obj)
    where = f"# {module.__name__}.{getattr(obj, '__qualname__', '')}\n" if module else ""
    return Code(where + source_text(obj, lines), language="python")
