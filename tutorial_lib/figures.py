"""Alt text for every figure a notebook shows.

A notebook's figures are PNGs in its outputs; a screen reader, and anyone reading the notebook
on a page where images do not load, gets only their alt text. :func:`enable_alt_text` (run by
:func:`tutorial_lib.runtime.quiet` in every notebook's set-up) makes IPython attach one to every
Matplotlib figure it displays: :func:`alt_text` reads the figure's title, each panel's title and
axes and the names in its legend; :func:`describe` adds what the figure shows in this run (the
computed reading printed under it). nbconvert and JupyterLab put the text in the image's ``alt``
attribute (``metadata["image/png"]["alt"]`` of the output).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib is imported only where a figure is drawn
    from matplotlib.figure import Figure

_DESCRIPTION = "_tutorial_description"


def _names(ax) -> list[str]:
    legend = ax.get_legend()
    texts = legend.get_texts() if legend is not None else []
    return [t.get_text() for t in texts if t.get_text()]


def alt_text(fig: Figure, max_names: int = 8) -> str:
    """The figure in words: its title, each panel's title, y against x and legend entries, then
    what :func:`describe` added."""
    parts = []
    title = fig._suptitle.get_text() if fig._suptitle is not None else ""
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_label() != "<colorbar>"]
    parts.append(f"Figure{': ' + title if title else ''} ({len(panels)} "
                 f"panel{'' if len(panels) == 1 else 's'}).")
    for i, ax in enumerate(panels, 1):
        what = ax.get_title() or f"panel {i}"
        axes = " against ".join(x for x in (ax.get_ylabel(), ax.get_xlabel()) if x)
        names = _names(ax)
        shown = ", ".join(names[:max_names]) + (f" and {len(names) - max_names} more"
                                                 if len(names) > max_names else "")
        parts.append(f"{what}: {axes or 'no axis labels'}" + (f"; lines: {shown}" if shown else "")
                     + ".")
    description = getattr(fig, _DESCRIPTION, "")
    if description:
        parts.append(f"What it shows in this run: {description}")
    return " ".join(parts)


def describe(fig: Figure, text: str) -> Figure:
    """Add ``text`` (what the figure shows in this run, computed) to ``fig``'s alt text."""
    setattr(fig, _DESCRIPTION, text.strip())
    return fig


def enable_alt_text(shell: object | None = None) -> bool:
    """Make IPython's PNG formatter give each Matplotlib figure its :func:`alt_text`; True where
    there is an IPython shell to do it in (a notebook kernel), False elsewhere. The inline backend
    registers its own formatter when the first figure is drawn (and again if reconfigured), so
    the wrapping is also checked after every cell, before the backend shows the cell's figures."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    if not getattr(shell, "_tutorial_alt_text", False):
        shell.events.register("post_execute", lambda: _wrap(shell))
        shell._tutorial_alt_text = True
    _wrap(shell)
    return True


def _wrap(shell: object) -> None:
    from matplotlib.figure import Figure

    png = shell.display_formatter.formatters["image/png"]
    try:
        plain = png.lookup_by_type(Figure)
    except KeyError:
        return  # no figure formatter yet: the check after the cell wraps it
    if getattr(plain, "_with_alt_text", False):
        return

    def with_alt(fig: Figure):
        data = plain(fig)
        data, metadata = data if isinstance(data, tuple) else (data, None)
        return data, {**(metadata or {}), "alt": alt_text(fig)}

    with_alt._with_alt_text = True
    png.for_type(Figure, with_alt)
