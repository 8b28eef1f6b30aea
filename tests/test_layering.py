"""The package's layering, read from its imports (``ast``, nothing is imported).

``tutorial_lib`` is a core (``tutorial_lib/*.py``) that knows nothing of the methods, the methods
(``tutorial_lib/methods/``) built on it, the plots (``tutorial_lib/plots/``) that draw results, and
the operations (``tutorial_lib/ops/``: prefetch, the offline bundle, the main job's report) that
run and ship the notebooks, which neither the core, the methods nor the plots import. The core
itself is layered, each module importing only from layers below it:

    {config, hashing} < {runtime, data, show, settings} < integrity
           < {models, tokenization, tasks, stats, references} < {params, batches} < training
           < {pretraining, results} < backbones < {heads, finetuning}

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
    {"config", "hashing"},  # hashing: the one file sha256 (data and integrity), imports nothing
    {"runtime", "data", "show", "settings"},  # show: the notebooks' source viewer; settings: each
    # notebook's settings class with its values at every scale (on config's Scale only)
    {"integrity"},  # the cache's size/hash records: on runtime's atomic writes, under every writer
    {"models", "tokenization", "tasks", "stats", "references"},
    {"params", "batches"},
    {"training"},  # the one recipe (fit) builds its optimizer with params
    {"pretraining", "results"},
    {"backbones"},
    {"heads", "finetuning"},
]
METHOD_MAX_LINES, METHOD_WARN_LINES = 450, 400


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
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("methods", "plots", "ops"):
        return parts[1]
    return "core"


def core_name(module: str) -> str:
    """``tutorial_lib.x`` → ``x``; every module of the ``data`` package → ``data``."""
    return module.split(".")[1] if "." in module else ""


def test_the_import_graph_is_read():
    """Guards the reader itself: known edges of each kind are found."""
    found = {(e.source, e.target) for e in EDGES}
    assert ("tutorial_lib.finetuning", "tutorial_lib.backbones") in found  # from .x import y
    assert ("tutorial_lib.pretraining", "tutorial_lib.data") in found  # from . import x
    assert ("tutorial_lib.data", "tutorial_lib.data.loading") in found  # inside the data package
    assert ("tutorial_lib.methods.unfreezing", "tutorial_lib.methods.discriminative") in found
    assert ("tutorial_lib.methods.adapters", "tutorial_lib.params") in found  # from ..x import y
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


def test_the_core_never_imports_methods_or_plots():
    bad = [str(e) for e in EDGES if kind(e.source) == "core" and kind(e.target) != "core"]
    assert bad == []


def test_nothing_a_notebook_reads_imports_the_operations():
    """Core, methods and plots never import ops: a student's path holds no prefetch, bundle or
    report code."""
    bad = [str(e) for e in EDGES if kind(e.source) != "ops" and kind(e.target) == "ops"]
    assert bad == []


def test_no_notebook_imports_the_operations():
    import json

    for path in sorted((ROOT.parent / "notebooks").glob("*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                         if c["cell_type"] == "code")
        assert "tutorial_lib.ops" not in code and "from tutorial_lib import ops" not in code, path.name


def test_plots_never_import_methods():
    bad = [str(e) for e in EDGES if kind(e.source) == "plots" and kind(e.target) == "methods"]
    assert bad == []


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


@pytest.mark.parametrize("module", [m for m in MODULES if kind(m) == "methods"
                                    and not MODULES[m].name.startswith("__")])
def test_method_modules_stay_short(module):
    lines = len(MODULES[module].read_text().splitlines())
    if lines > METHOD_WARN_LINES:
        warnings.warn(f"{module}: {lines} lines (over {METHOD_WARN_LINES}; the limit is "
                      f"{METHOD_MAX_LINES})", stacklevel=1)
    assert lines <= METHOD_MAX_LINES, f"{module}: {lines} lines; split it"
