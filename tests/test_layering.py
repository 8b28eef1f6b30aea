"""The package's layering, read from its imports (``ast``, nothing is imported).

``tutorial_lib`` is a core (``tutorial_lib/*.py``) that knows nothing of the methods; the chapters
(``tutorial_lib/methods/<chapter>/``: a notebook family's methods, settings and plots) built on the
core and never on each other; above them the catalogue (``tutorial_lib/methods/__init__.py`` and
``references.py``, which import every chapter's settings); and the operations
(``tutorial_lib/ops/``: prefetch, the offline bundle, the main job's report) that run and ship the
notebooks, which neither the core nor a chapter imports. The core itself is layered, each module
importing only from layers below it:

    {config, hashing} < {runtime, data, show, settings} < integrity
           < {models, tokenization, tasks, stats} < anatomy < {params, batches, checkpoints} < training
           < {evaluation, ours} < {pretraining, results, plots} < backbones < {heads, finetuning}

(``ours``: the cache contract of our pretrained models, which ``pretraining`` writes and
``backbones`` reads: loading "ours" needs nothing of the pretraining loop.)

(``data`` is a package: its modules form one unit of the ``data`` layer.)

A newcomer reads it bottom-up; no circle means no module needs another that needs it back, and no
import hides inside a function to dodge one.
"""

import ast
import warnings
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1] / "tutorial_lib"
PACKAGE = "tutorial_lib"
LAYERS = [
    {"config", "hashing", "power", "floors", "rounding", "figures"},  # figures: alt text (matplotlib
    # only, imported where a figure is drawn); hashing: the one file sha256 (data
    # and integrity), imports nothing; power and floors: the arithmetic stats re-exports (scipy
    # only); rounding: the one rule every shown number follows (decimal only)
    {"runtime", "data", "show", "selfcheck", "settings", "premises"},  # premises: what a verdict
    # rests on (power's α), re-exported by stats  # show: the notebooks' source viewer;
    # selfcheck: a learner's function against the library's on random inputs; settings: each
    # notebook's settings class with its values at every scale (on config's Scale only)
    {"integrity"},  # the cache's size/hash records: on runtime's atomic writes, under every writer
    {"models", "tokenization", "tasks", "stats"},
    {"anatomy", "pretraining_settings"},  # anatomy: where each family keeps its parts (on models);
    # pretraining_settings: 01's class (our model's TransformerConfig and the recipe)
    {"params", "batches", "checkpoints"},  # checkpoints: exact resume (integrity, models)
    {"training"},  # the one recipe (fit) builds its optimizer with params
    {"evaluation", "ours"},  # the evaluators and evaluate (on training.to_device); ours: our
    # pretrained models' cache contract (tokenizer, config, checkpoint directory, load)
    {"pretraining", "results", "plots"},  # plots: the figures every notebook family shares
    {"backbones"},
    {"heads", "finetuning"},
]
MODULE_MAX_LINES, METHOD_WARN_LINES = 500, 400  # any module; a warning for a chapter's
SETTINGS_MAX_LINES = 300  # the settings core
STILL_TOO_LONG: dict[str, str] = {}  # known, with the change that shortens them (the test fails
# once one is short)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


class Edge(NamedTuple):
    source: str
    target: str
    line: int
    top_level: bool

    def __str__(self) -> str:
        where = "" if self.top_level else " (inside a function)"
        return f"{MODULES[self.source].relative_to(ROOT.parent)}:{self.line}: {self.target}{where}"


def resolve(name: str) -> str | None:
    """The tutorial_lib module ``name`` refers to (``pkg.mod.attr`` → ``pkg.mod``), if any."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(tree: ast.Module):
    """(node, top_level) for every import; top level = not inside a function or class body."""
    def walk(node: ast.AST, top: bool):
        for child in ast.iter_child_nodes(node):
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.ClassDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, top
            yield from walk(child, inner)
    yield from walk(tree, True)


def edges_of(module: str) -> list[Edge]:
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    out = []
    for node, top in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:  # relative: from the module's package, one level up per extra dot
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            # `from pkg import mod` imports the module pkg.mod; `from mod import attr` the module mod
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for name in names:
            target = resolve(name) if name.split(".")[0] == PACKAGE else None
            if target and target != module and target != PACKAGE:
                out.append(Edge(module, target, node.lineno, top))
    return out


EDGES = [e for m in MODULES for e in edges_of(m)]


def kind(module: str) -> str:
    """"core", "chapter" (inside ``methods/<chapter>/``), "catalogue" (``methods`` itself and its
    top-level modules) or "ops"."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "ops":
        return "ops"
    if len(parts) > 1 and parts[1] == "methods":
        return "chapter" if chapter(module) else "catalogue"
    return "core"


def chapter(module: str) -> str | None:
    """``tutorial_lib.methods.<chapter>[.module]`` → the chapter's name, if ``<chapter>`` is a
    package."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "methods" and (ROOT / "methods" / parts[2]).is_dir():
        return parts[2]
    return None


def core_name(module: str) -> str:
    """``tutorial_lib.x`` → ``x``; every module of the ``data`` package → ``data``."""
    return module.split(".")[1] if "." in module else ""


def test_the_backbones_load_ours_without_the_pretraining_loop():
    """``backbones`` reads our models through ``ours`` (the cache contract), not ``pretraining``."""
    targets = {e.target for e in EDGES if e.source == "tutorial_lib.backbones"}
    assert "tutorial_lib.ours" in targets and "tutorial_lib.pretraining" not in targets


def test_the_import_graph_is_read():
    """Guards the reader itself: known edges of each kind are found."""
    found = {(e.source, e.target) for e in EDGES}
    assert ("tutorial_lib.finetuning", "tutorial_lib.backbones") in found  # from .x import y
    assert ("tutorial_lib.ours", "tutorial_lib.data") in found  # from . import x
    assert ("tutorial_lib.data", "tutorial_lib.data.loading") in found  # inside the data package
    assert ("tutorial_lib.methods.adaptation.unfreezing",
            "tutorial_lib.methods.adaptation.discriminative") in found  # from .x import y
    assert ("tutorial_lib.methods.peft.adapters", "tutorial_lib.params") in found  # from ..x import y
    assert ("tutorial_lib.ops.prefetch", "tutorial_lib.ops.bundle") in found  # from . import x
    assert len(MODULES) > 30


def test_no_import_cycles():
    graph = defaultdict(set)
    for e in EDGES:
        graph[e.source].add(e.target)
    cycles, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" → ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for module in sorted(MODULES):
        if module not in state:
            visit(module)
    assert cycles == []


def test_the_core_never_imports_a_chapter_or_the_catalogue():
    bad = [str(e) for e in EDGES if kind(e.source) == "core" and kind(e.target) != "core"]
    assert bad == []


def test_chapters_never_import_each_other_or_the_catalogue():
    """A chapter stands on the core alone: what two chapters share belongs in the core."""
    bad = [str(e) for e in EDGES if kind(e.source) == "chapter"
           and (kind(e.target) == "catalogue"
                or kind(e.target) == "chapter" and chapter(e.target) != chapter(e.source))]
    assert bad == []


def test_every_chapter_has_its_settings_plots_and_reading_list():
    for path in sorted(p for p in (ROOT / "methods").iterdir() if p.is_dir() and p.name != "__pycache__"):
        assert (path / "settings.py").is_file(), path.name
        doc = ast.get_docstring(ast.parse((path / "__init__.py").read_text())) or ""
        assert "Read first" in doc and "The notebook calls" in doc, f"{path.name}: no reading list"
        # every module of the chapter is named in its reading list
        for module in sorted(path.glob("*.py")):
            if module.name != "__init__.py":
                assert module.stem in doc, f"{path.name}/__init__.py does not list {module.name}"


def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def test_every_name_a_reading_list_gives_exists():
    """``module.name`` in a chapter's reading list (``peft.adapters.Adapter`` for another chapter's)
    is defined at the top of that module: the list cannot outlive a rename."""
    import re

    for init in sorted((ROOT / "methods").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        for ref in re.findall(r"``(\w+(?:\.\w+)+)``", doc):
            if ref.endswith(".py"):
                continue
            *path, name = ref.split(".")
            module = init.parent.joinpath(*path).with_suffix(".py")
            if not module.is_file():
                module = (ROOT / "methods").joinpath(*path).with_suffix(".py")
            if module.is_file():  # (``training.Method`` and the like name the core)
                assert name in _top_level_names(module), f"{init.parent.name}: ``{ref}`` is not defined"


def test_nothing_a_notebook_reads_imports_the_operations():
    """Core and chapters never import ops: a student's path holds no prefetch, bundle or report
    code."""
    bad = [str(e) for e in EDGES if kind(e.source) != "ops" and kind(e.target) == "ops"]
    assert bad == []


def test_no_notebook_imports_the_operations():
    import json

    for path in sorted((ROOT.parent / "notebooks").glob("*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                         if c["cell_type"] == "code")
        assert "tutorial_lib.ops" not in code and "from tutorial_lib import ops" not in code, path.name


def test_no_import_of_our_own_modules_inside_a_function():
    """A function-level import of a sibling is the smell of dodging a circle."""
    bad = [str(e) for e in EDGES if not e.top_level]
    assert bad == []


def test_every_core_module_has_a_layer_and_imports_only_from_lower_layers():
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    core = {core_name(m) for m in MODULES if kind(m) == "core" and m != PACKAGE}
    assert sorted(core - set(layer)) == [], "a new core module: give it a layer in LAYERS"
    assert sorted(set(layer) - core) == [], "LAYERS names a module that does not exist"
    bad = [f"{e} (layer {layer[core_name(e.source)]} → {layer[core_name(e.target)]})"
           for e in EDGES if kind(e.source) == kind(e.target) == "core" and e.source != PACKAGE
           and e.target != PACKAGE and core_name(e.source) != core_name(e.target)
           and layer[core_name(e.target)] >= layer[core_name(e.source)]]
    assert bad == []


@pytest.mark.parametrize("module", [m for m in MODULES if not MODULES[m].name == "__init__.py"])
def test_modules_stay_short(module):
    lines = len(MODULES[module].read_text().splitlines())
    if kind(module) == "chapter" and lines > METHOD_WARN_LINES:
        warnings.warn(f"{module}: {lines} lines (over {METHOD_WARN_LINES}; the limit is "
                      f"{MODULE_MAX_LINES})", stacklevel=1)
    limit = SETTINGS_MAX_LINES if module == "tutorial_lib.settings" else MODULE_MAX_LINES
    if module in STILL_TOO_LONG:
        assert lines > limit, f"{module} is short now: take it off STILL_TOO_LONG"
        pytest.xfail(f"{module}: {lines} lines; {STILL_TOO_LONG[module]}")
    assert lines <= limit, f"{module}: {lines} lines; split it"


def test_the_tests_mirror_the_chapters():
    """``tests/methods/<chapter>/test_<module>.py`` tests ``methods/<chapter>/<module>.py``."""
    tests = ROOT.parent / "tests" / "methods"
    for path in sorted(tests.rglob("test_*.py")):
        module = ROOT / "methods" / path.parent.name / f"{path.stem.removeprefix('test_')}.py"
        assert module.is_file(), f"{path.relative_to(ROOT.parent)} tests no module {module.name}"
    chapters = {p.name for p in (ROOT / "methods").iterdir() if (p / "__init__.py").is_file()}
    assert chapters == {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"}


def test_the_chapter_catalogue_names_each_chapters_notebooks():
    """The table in ``tutorial_lib/methods/__init__.py`` against where each notebook's settings
    class lives (issue 62: five chapters had wrong notebook numbers)."""
    import re
    from collections import defaultdict

    from tutorial_lib import methods

    actual = defaultdict(set)
    for cls in methods.NOTEBOOK_SETTINGS:
        parts = cls.__module__.split(".")
        if parts[1] == "methods":
            actual[parts[2]].add(int(cls.notebook[:2]))
    table = {}
    for name, numbers in re.findall(r"^(\w+)\s+(\d\d(?:-\d\d)?)\s", methods.__doc__, re.M):
        first, _, last = numbers.partition("-")
        table[name] = set(range(int(first), int(last or first) + 1))
    assert table == dict(actual)


# The one runner: only finetuning.run calls training.fit; each exception is named with its reason.
FIT_CALLERS = {
    "tutorial_lib/finetuning.py": "the one runner",
    "tutorial_lib/methods/peft/peft_checks.py": "step_costs, a timing probe of single steps",
}


def test_only_the_runner_calls_fit():
    """Every training run goes through ``finetuning.run`` (a Recipe); a module that imports
    ``fit`` (or calls ``training.fit``) outside :data:`FIT_CALLERS` assembles its own loop.
    (``pretraining.pretrain``, 01's distributed loop, builds its trainer from the pieces: it calls
    neither.)"""
    repo = ROOT.parent
    found = set()
    for folder in ("tutorial_lib", "benchmarks", "scripts"):
        for path in sorted((repo / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                imports_fit = (isinstance(node, ast.ImportFrom) and (node.module or "").endswith("training")
                               and any(a.name in ("fit", "fit_with") for a in node.names))
                calls_fit = (isinstance(node, ast.Attribute) and node.attr in ("fit", "fit_with")
                             and isinstance(node.value, ast.Name) and node.value.id == "training")
                if imports_fit or calls_fit:
                    found.add(path.relative_to(repo).as_posix())
    assert found == set(FIT_CALLERS), sorted(found ^ set(FIT_CALLERS))
