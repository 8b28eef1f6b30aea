"""The reading lists against the notebooks (static: ``ast`` and ``json``, nothing is imported or run).

Three things a newcomer trusts without checking:

* the catalogue table of :mod:`tutorial_lib.methods` (chapter → notebooks) names, for each chapter,
  the notebooks whose settings class lives in it — a notebook's chapter is the one it imports its
  settings from (``from tutorial_lib.methods.<chapter>.settings import …``); 01 has none;
* a chapter docstring's "The notebook calls" lists exactly the library names its notebooks call:
  every name missing from the list, and every listed name no notebook calls, fails here;
* each notebook's header (its first markdown cell) links its chapter's reading list (01: the
  docstring of ``tutorial_lib/pretraining.py``).

What counts as a call. In a notebook's **code cells only** — the solutions written in markdown
```` ```python ```` blocks and the exercises' hints are not counted (a docstring may name them in
parentheses, which the check skips) — every attribute read on a name bound to a
``tutorial_lib.methods`` module (``lm_stage.lm_blocks``; ``multitask.Experiment.of`` counts as
``multitask.Experiment``) and every name imported from one (``from tutorial_lib.methods.x.y import
z``). That covers the notebook's own chapter, another chapter's module it borrows (03's
``peft.adapters``, 18's ``adaptation.discriminative``) and the catalogue's ``references``. The
chapter's ``settings`` module is left out: every notebook reads its class, and "Read first" and
"Modules" name it. The core (``finetuning``, ``premises``, …) is left out: every notebook uses it, and
a "calls" list names no core module.

How a list is read. The section runs from the line "The notebook calls" to the next unindented
line. A chapter that serves several notebooks splits it by notebook: a line starting ``NN:``
opens notebook NN's entry (the single-notebook chapters have no prefix). Text in parentheses is
commentary and skipped. Each ````module.name```` opens a module — the chapter's own
(``lm_stage``), another chapter's (``peft.adapters``) or the catalogue's (``references``) — and each
bare ````name```` after it belongs to the last module opened: ````lm_stage.task_texts````,
````lm_blocks```` lists ``lm_stage.task_texts`` and ``lm_stage.lm_blocks``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
METHODS = REPO / "tutorial_lib" / "methods"
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHAPTERS = sorted(p.name for p in METHODS.iterdir() if (p / "__init__.py").is_file())
PREFIX = "tutorial_lib.methods"
CORE_READING_LIST = {"01": "tutorial_lib/pretraining.py"}  # a notebook without a chapter


# --- what a notebook calls ---------------------------------------------------------------------

def _cells(path: Path, kind: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def _python(source: str) -> str:
    """A cell's source with IPython's ``%magic`` and ``!shell`` lines made ``pass`` (same indent)."""
    return "\n".join(re.sub(r"^(\s*)[%!].*$", r"\1pass", line) for line in source.splitlines())


def _module_file(dotted: str) -> Path | None:
    """``tutorial_lib/methods/<dotted>.py`` (``peft.adapters``, ``references``), if it is a module."""
    path = METHODS.joinpath(*dotted.split(".")).with_suffix(".py") if dotted else None
    return path if path is not None and path.is_file() else None


def _counted(name: str) -> bool:
    """Not a chapter's settings (every notebook reads its class)."""
    return not re.fullmatch(r"\w+\.settings\.\w+", name)


def notebook_chapter(code: str) -> str | None:
    """The chapter a notebook imports its settings from (None for 01)."""
    found = set(re.findall(rf"^from {re.escape(PREFIX)}\.(\w+)\.settings import", code, re.M))
    assert len(found) <= 1, f"settings from several chapters: {found}"
    return found.pop() if found else None


def calls(sources: list[str]) -> set[str]:
    """The ``tutorial_lib.methods`` names the code calls or reads, as ``chapter.module.name``
    (``references.name`` for the catalogue's), in cell order (a later import rebinds a name)."""
    bound: dict[str, str] = {}  # a name in the notebook → the methods module it is bound to
    found: set[str] = set()
    for source in sources:
        for statement in ast.parse(_python(source)).body:
            nodes = list(ast.walk(statement))
            for node in nodes:
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith(PREFIX + ".") and alias.asname:
                            bound[alias.asname] = alias.name.removeprefix(PREFIX + ".")
                        elif alias.name.startswith(PREFIX):  # tutorial_lib.methods.x.y.name: unread
                            raise ValueError(f"import {alias.name} without a name: not read here")
                elif isinstance(node, ast.ImportFrom) and node.module:
                    inside = node.module == PREFIX or node.module.startswith(PREFIX + ".")
                    if node.module == "tutorial_lib" and "methods" in {a.name for a in node.names}:
                        raise ValueError("from tutorial_lib import methods: not read here")
                    for alias in node.names:
                        local = alias.asname or alias.name
                        if not inside:
                            bound.pop(local, None)  # e.g. the core's plots after a chapter's
                            continue
                        module = node.module.removeprefix(PREFIX).lstrip(".")
                        full = f"{module}.{alias.name}".lstrip(".")
                        if _module_file(full):
                            bound[local] = full
                        else:
                            bound.pop(local, None)
                            found.add(full)
            for node in nodes:
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id in bound):
                    found.add(f"{bound[node.value.id]}.{node.attr}")
    return {name for name in found if _counted(name)}


def notebook_calls() -> dict[str, tuple[str | None, set[str]]]:
    """Each notebook (``"03"``) → its chapter and the methods names its code cells call."""
    out = {}
    for path in NOTEBOOKS:
        code = _cells(path, "code")
        out[path.name[:2]] = (notebook_chapter("\n".join(code)), calls(code))
    return out


# --- what a chapter's docstring lists -----------------------------------------------------------

def docstring(chapter: str) -> str:
    return ast.get_docstring(ast.parse((METHODS / chapter / "__init__.py").read_text())) or ""


def _section(doc: str) -> str:
    lines = doc.splitlines()
    start = lines.index("The notebook calls") + 1
    end = next((i for i in range(start, len(lines)) if lines[i][:1].strip()), len(lines))
    return "\n".join(lines[start:end])


def _without_parentheses(text: str) -> str:
    while re.search(r"\([^()]*\)", text):
        text = re.sub(r"\([^()]*\)", " ", text)
    return text


def listed(doc: str, chapter: str) -> dict[str | None, set[str]]:
    """The names "The notebook calls" lists, per notebook (``None``: no ``NN:`` prefixes), as
    ``chapter.module.name``; a ``module.name`` that names no methods module raises ValueError."""
    entries: dict[str | None, set[str]] = {}
    notebook, module = None, None
    for line in _without_parentheses(_section(doc)).splitlines():
        if prefix := re.match(r"\s*(\d\d):", line):
            notebook, module = prefix.group(1), None
            entries.setdefault(notebook, set())
            line = line[prefix.end():]
        for token in re.findall(r"``([\w.]+)``", line):
            if "." in token:
                path, _, token = token.rpartition(".")
                module = next((m for m in (f"{chapter}.{path}", path) if _module_file(m)), None)
                if module is None:
                    raise ValueError(f"{chapter}: ``{path}.{token}``: {path} is no module of "
                                     "tutorial_lib.methods (the core is not listed)")
            elif module is None:
                raise ValueError(f"{chapter}: ``{token}`` follows no ``module.name``")
            entries.setdefault(notebook, set()).add(f"{module}.{token}")
    return entries


def mismatches(chapter: str, doc: str, called: dict[str, set[str]]) -> list[str]:
    """What the chapter's list gets wrong against ``called`` (its notebooks → their calls)."""
    entries = listed(doc, chapter)
    problems = []
    if len(called) > 1 and None in entries:
        problems.append(f"{chapter} serves {sorted(called)}: split its list by ``NN:``")
    for notebook, names in sorted(called.items()):
        given = entries.get(notebook if len(called) > 1 else None, set())
        missing, extra = sorted(names - given), sorted(given - names)
        if missing:
            problems.append(f"{chapter} ({notebook}) misses {missing}")
        if extra:
            problems.append(f"{chapter} ({notebook}) lists what it does not call: {extra}")
    problems += [f"{chapter}: {n}: not its notebook" for n in entries if n and n not in called]
    return problems


# --- the tests ----------------------------------------------------------------------------------

CALLED = notebook_calls()


def by_chapter() -> dict[str, dict[str, set[str]]]:
    chapters: dict[str, dict[str, set[str]]] = {c: {} for c in CHAPTERS}
    for notebook, (chapter, names) in CALLED.items():
        if chapter is not None:
            chapters[chapter][notebook] = names
    return chapters


def test_every_notebook_but_01_has_a_chapter():
    assert [nb for nb, (chapter, _) in CALLED.items() if chapter is None] == list(CORE_READING_LIST)
    assert len(CALLED) == len(NOTEBOOKS) >= 18


def test_only_a_chapter_notebook_calls_the_methods():
    assert all(not names for chapter, names in CALLED.values() if chapter is None)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_notebook_calls_lists_what_its_notebooks_call(chapter):
    """The list equals what the notebooks' code cells call (module docstring: how both are read)."""
    assert mismatches(chapter, docstring(chapter), by_chapter()[chapter]) == []


def test_a_missing_or_an_extra_name_fails():
    """The check can fail: a list less one name, or with one more, is caught (and a core name or
    a bare name before any module is refused)."""
    doc = ("Chapter x.\n\nThe notebook calls\n"
           "    03: ``feature_extraction.ScalarMix`` (with ``ignored``), ``mix_weights``;\n"
           "        ``plots.plot_cost_vs_error``; ``peft.adapters.Adapter``.\n"
           "    04: ``unfreezing.Unfreezing``.\n\nAfter the section: ``plots.nothing``.\n")
    called = {"03": {"adaptation.feature_extraction.ScalarMix", "adaptation.feature_extraction.mix_weights",
                     "adaptation.plots.plot_cost_vs_error", "peft.adapters.Adapter"},
              "04": {"adaptation.unfreezing.Unfreezing"}}
    assert mismatches("adaptation", doc, called) == []
    less = doc.replace(", ``mix_weights``", "")
    assert mismatches("adaptation", less, called) == [
        "adaptation (03) misses ['adaptation.feature_extraction.mix_weights']"]
    more = doc.replace("``unfreezing.Unfreezing``", "``unfreezing.Unfreezing``, ``UnfreezingHandler``")
    assert mismatches("adaptation", more, called) == [
        "adaptation (04) lists what it does not call: ['adaptation.unfreezing.UnfreezingHandler']"]
    unsplit = doc.replace("    04: ", "        ")
    assert mismatches("adaptation", unsplit, called)
    with pytest.raises(ValueError, match="no module"):
        listed(doc.replace("``plots.plot_cost_vs_error``", "``finetuning.finetune``"), "adaptation")
    with pytest.raises(ValueError, match="follows no"):
        listed(doc.replace("03: ``feature_extraction.ScalarMix``", "03: ``ScalarMix``"), "adaptation")
    # the real lists fail the same way
    real = by_chapter()["unlabelled"]
    assert mismatches("unlabelled", docstring("unlabelled").replace(", ``lm_blocks``", ""), real)
    with pytest.raises(ValueError, match="not read here"):
        calls(["import tutorial_lib.methods.adaptation.plots\n"])
    assert calls(["from tutorial_lib.methods.adaptation import plots as p\np.plot_x(1)\n"
                  "from tutorial_lib import plots as p\np.plot_y(1)\n"
                  "from tutorial_lib.methods.peft.adapters import Adapter\n"
                  "from tutorial_lib.methods.adaptation.settings import AdapterSettings\n"]) == {
        "adaptation.plots.plot_x", "peft.adapters.Adapter"}


def _catalogue() -> dict[str, set[str]]:
    """The table of :mod:`tutorial_lib.methods`: chapter → its notebooks (``02-05`` → 02…05)."""
    doc = ast.get_docstring(ast.parse((METHODS / "__init__.py").read_text())) or ""
    table = {}
    for chapter, numbers in re.findall(r"^(\w+)\s+(\d\d(?:[-–]\d\d)?)\s", doc, re.M):
        first, _, last = numbers.replace("–", "-").partition("-")
        table[chapter] = {f"{n:02d}" for n in range(int(first), int(last or first) + 1)}
    return table


def test_the_catalogue_gives_each_chapter_its_notebooks():
    """A notebook's chapter is the one it imports its settings from: the table read against the
    notebooks themselves (``tests/test_layering.py`` reads it against the registered classes)."""
    actual = {c: set(notebooks) for c, notebooks in by_chapter().items()}
    assert _catalogue() == actual


HEADER_LINK = "Reading list: the docstring of [`{name}`](../{target})."


def reading_list_of(notebook: str) -> tuple[str, str]:
    """The reading list a notebook's header links: its chapter's ``__init__.py`` (01: the core's
    ``pretraining.py``), as (what the link shows, where it points)."""
    if notebook in CORE_READING_LIST:
        return CORE_READING_LIST[notebook], CORE_READING_LIST[notebook]
    chapter = f"tutorial_lib/methods/{CALLED[notebook][0]}"
    return chapter, f"{chapter}/__init__.py"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_header_links_its_chapters_reading_list(path):
    name, target = reading_list_of(path.name[:2])
    header = _cells(path, "markdown")[0]
    assert HEADER_LINK.format(name=name, target=target) in " ".join(header.split()), path.stem
    doc = ast.get_docstring(ast.parse((REPO / target).read_text())) or ""
    assert "Reading list" in doc or "The notebook calls" in doc, f"{target}: no reading list"
