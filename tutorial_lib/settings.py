"""The settings core: what every notebook's settings class is built from, and their registry.

Each notebook's class (one frozen dataclass carrying its own values at each scale) lives in its
chapter, ``tutorial_lib/methods/<chapter>/settings.py``. A notebook starts with::

    from tutorial_lib.methods.prompts.settings import DARTSettings
    scale = config.get_scale()
    settings = DARTSettings.at(scale)      # typed: the IDE knows every field
    settings = settings.replace(steps=40)  # a student's change; a misspelt name is an error

The defaults in a class are its classroom values; ``scales`` holds, for each other scale, only the
fields that differ (a subclass's ``scales`` add to its base class's). ``notebook`` is the class's
one link to its notebook's file name, and ``also_needs`` what that notebook loads without a field
naming it. Fields that name tasks or backbones are typed (:data:`TaskName`, :data:`BackboneName`,
…): ``tutorial_lib.ops.prefetch`` reads what a scale needs from those types (:func:`named`), so a new
field of such a type is fetched with no other edit.
"""

import types
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from typing import Annotated, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

import pandas as pd

from .config import SCALES, ConfigError, Scale, apply_seed_set, get_scale

# --- what a field names --------------------------------------------------------------------------

TASK, BACKBONE = "task", "backbone"


@dataclass(frozen=True)
class Names:
    """Marks a settings field whose value names tasks or backbones (a name, a tuple of names, or
    a tuple of pairs); ``kinds``: the kinds of model (``backbones.KINDS``) a backbone may be."""

    what: str  # TASK or BACKBONE
    kinds: tuple[str, ...] = ()  # (): any kind


@dataclass(frozen=True)
class SeedField:
    """Marks a settings field holding seeds (or few-shot split seeds): a seed set other than main
    (``$TUTORIAL_SEEDS``: held-out, or an integer offset) moves it (:func:`seed_fields`)."""


Seed = Annotated[int, SeedField()]
Seeds = Annotated[tuple[int, ...], SeedField()]
TaskName = Annotated[str, Names(TASK)]
TaskNames = Annotated[tuple[str, ...], Names(TASK)]
TaskPairs = Annotated[tuple[tuple[str, str], ...], Names(TASK)]  # (intermediate, target)
BackboneName = Annotated[str, Names(BACKBONE)]
BackboneNames = Annotated[tuple[str, ...], Names(BACKBONE)]
LMName = Annotated[str, Names(BACKBONE, kinds=("causal", "masked"))]  # its LM head is used


@dataclass(frozen=True)
class AlsoNeeds:
    """What a notebook loads that no field of its settings names (prefetch fetches it too)."""

    tasks: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()  # tutorial_lib.data registry names
    backbones: tuple[str, ...] = ()


# --- the base classes ----------------------------------------------------------------------------

_REGISTRY: dict[str, type["Settings"]] = {}  # notebook name -> its settings class
_CHECKED: set[type["Settings"]] = set()

Overrides = dict[str, dict[str, object]]  # scale name -> {field: value}, only what differs
S = TypeVar("S", bound="Settings")


@dataclass(frozen=True)
class Settings:
    """Base class: :meth:`at` a scale, and :meth:`replace` with checked names (also reaching into
    a nested ``budget``)."""

    notebook: ClassVar[str]  # a notebook's class: the notebook's file name, e.g. "09_dart"
    scales: ClassVar[Overrides] = {}
    also_needs: ClassVar[AlsoNeeds] = AlsoNeeds()

    def __init_subclass__(cls, **kwargs: object) -> None:
        """A class that defines ``notebook`` is that notebook's settings: it joins the registry
        (:func:`registered`); two classes claiming one notebook are an error."""
        super().__init_subclass__(**kwargs)
        if "notebook" in vars(cls):
            other = _REGISTRY.get(cls.notebook)
            if other is not None and other.__qualname__ != cls.__qualname__:  # (a reload is fine)
                raise ConfigError(f"{cls.__name__} and {other.__name__} both claim notebook "
                                  f"{cls.notebook!r}")
            _REGISTRY[cls.notebook] = cls

    @classmethod
    def overrides(cls, scale: Scale | str) -> dict[str, object]:
        """The fields that differ from the defaults at ``scale``: the base classes' first."""
        name = scale.name if isinstance(scale, Scale) else get_scale(scale).name
        out: dict[str, object] = {}
        for klass in reversed(cls.__mro__):
            out.update(vars(klass).get("scales", {}).get(name, {}))
        return out

    @classmethod
    def at(cls: type[S], scale: Scale | str) -> S:
        """These settings at ``scale`` (a :class:`~tutorial_lib.config.Scale` or its name), with
        this run's seed set (``$TUTORIAL_SEEDS``: held-out seeds for ``benchmarks/replicate.py``).

        e.g. ``DARTSettings.at("smoke").steps`` is 4 and ``DARTSettings.at("classroom").steps`` 20.
        """
        changes = cls.overrides(scale)
        names = {f.name for f in fields(cls)}
        if set(changes) - names:
            raise ConfigError(f"{cls.__name__}.scales sets no field(s) {sorted(set(changes) - names)}; "
                              f"its fields: {sorted(names)}")
        out = apply_seed_set(cls(**changes), seed_fields(cls))
        object.__setattr__(out, "_scale", scale if isinstance(scale, Scale) else get_scale(scale))
        return out

    @property
    def scale(self) -> Scale:
        """The scale these settings were made :meth:`at` (kept by :meth:`replace`); settings made
        by the class itself hold its defaults, the classroom values. Functions that take settings
        read the scale here: a notebook never passes both."""
        return getattr(self, "_scale", None) or get_scale("classroom")

    def table(self) -> pd.DataFrame:
        """The settings as a table, one row per field (a nested ``budget``'s fields as
        ``budget.<field>``): the value, and whether it differs from the class's default (its
        classroom value: the scale or a ``replace`` changed it) — readable where
        ``print(settings)`` is one long line."""
        default = type(self)()
        rows = []
        for f in fields(self):
            value, base = getattr(self, f.name), getattr(default, f.name)
            if isinstance(value, Budget):
                rows += [{"setting": f"{f.name}.{g.name}", "value": repr(getattr(value, g.name)),
                          "changed": getattr(value, g.name) != getattr(base, g.name)}
                         for g in fields(value)]
            else:
                rows.append({"setting": f.name, "value": repr(value), "changed": value != base})
        out = pd.DataFrame(rows).set_index("setting")
        out["changed"] = out["changed"].map({True: "yes", False: ""})
        return out.rename(columns={"changed": "differs from classroom"})

    def replace(self: S, **changes: object) -> S:
        """A copy with ``changes``; a name that is not a field here may be a field of ``budget``.

        >>> Budget().replace(epochs=4).epochs
        4
        """
        names = {f.name for f in fields(self)}
        inner = {k: v for k, v in changes.items() if k not in names}
        if inner:
            budget = getattr(self, "budget", None)
            budget_names = {f.name for f in fields(Budget)} if budget else set()
            if set(inner) - budget_names:
                raise ConfigError(
                    f"{type(self).__name__} has no setting(s) {sorted(set(inner) - budget_names)}; "
                    f"its settings: {sorted(names | budget_names)}")
            changes = {k: v for k, v in changes.items() if k in names}
            changes["budget"] = budget.replace(**inner)
        out = replace(self, **changes)
        if hasattr(self, "_scale"):
            object.__setattr__(out, "_scale", self._scale)
        return out


@dataclass(frozen=True)
class Budget(Settings):
    """What a fine-tuning run may spend: the same for a method and its baseline."""

    epochs: int = 3
    batch_size: int = 32
    lr: float = 1e-3
    warmup_frac: float = 0.1
    weight_decay: float = 0.01
    max_norm: float = 1.0
    eval_batch_size: int = 128
    max_len: int | None = None  # tokens per input (None: the backbone's limit)
    # Length-grouped training batches and length-sorted evaluation: less padding, so faster on a
    # CPU, but other batches than the default shuffle (results are not comparable across it).
    group_by_length: bool = False


# MiniLM's usual fine-tuning recipe (small rate, two epochs), with length-grouped batches; 02-04
# share it, so their identical runs are computed once (the run cache).
MINILM_RECIPE = Budget(epochs=2, lr=1e-4, group_by_length=True)
ALL_SEEDS = (0, 1, 2, 3, 4)


@dataclass(frozen=True)
class Classification(Settings):
    """A fine-tuning comparison on one task: backbone, data sizes, seeds and the shared budget."""

    task: TaskName = "trec"
    backbone: BackboneName = "ours"
    seeds: Seeds = (0, 1, 2)
    train_examples: int | None = None  # fixed random subsets (None: the whole split)
    validation_examples: int | None = None
    test_examples: int | None = None
    budget: Budget = Budget()

    scales: ClassVar[Overrides] = {
        "smoke": dict(train_examples=256, validation_examples=200, test_examples=200, seeds=(0, 1),
                      budget=Budget(epochs=1)),
        "gpu": dict(train_examples=None, seeds=ALL_SEEDS, budget=Budget(epochs=4, lr=1e-4)),
        "paper": dict(train_examples=None, seeds=ALL_SEEDS,
                      budget=Budget(epochs=3, batch_size=16, lr=6e-5, max_norm=0.25)),
    }


# --- the registry: every notebook's class, found by its ``notebook`` name ----------------------

def _marker(hint: object) -> Names | None:
    """The :class:`Names` in a field's type (also inside ``X | None``), if any."""
    if get_origin(hint) is Annotated:
        return next((m for m in hint.__metadata__ if isinstance(m, Names)), None)
    if get_origin(hint) in (Union, types.UnionType):
        return next(filter(None, map(_marker, get_args(hint))), None)
    return None


def _strings(value: object) -> Iterator[str]:
    """The strings in a value: a name, None, a tuple or a tuple of pairs."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (tuple, list)):
        for inner in value:
            yield from _strings(inner)


def markers(cls: type[Settings]) -> dict[str, Names]:
    """``{field: its Names marker}`` for every field of ``cls`` that names tasks or backbones."""
    hints = get_type_hints(cls, include_extras=True)
    found = {f.name: _marker(hints[f.name]) for f in fields(cls)}
    return {name: m for name, m in found.items() if m is not None}


def seed_fields(cls: type[Settings]) -> list[str]:
    """The fields of ``cls`` typed :data:`Seed` or :data:`Seeds` (in a nested ``budget`` none)."""
    hints = get_type_hints(cls, include_extras=True)
    return [f.name for f in fields(cls) if get_origin(hints[f.name]) is Annotated
            and any(isinstance(m, SeedField) for m in hints[f.name].__metadata__)]


def named(settings: Settings) -> Iterator[tuple[Names, str, str]]:
    """(marker, field, name) for every task or backbone name in ``settings``' typed fields."""
    for field_name, marker in markers(type(settings)).items():
        for name in _strings(getattr(settings, field_name)):
            yield marker, field_name, name


def _check(cls: type[Settings]) -> None:
    """Fail at import on a scale that does not exist or a misspelt field in ``scales``."""
    for klass in cls.__mro__:
        unknown = set(vars(klass).get("scales", {})) - set(SCALES)
        if unknown:
            raise ConfigError(f"{klass.__name__}.scales names no scale(s) {sorted(unknown)}: "
                              f"the scales are {list(SCALES)}")
    for scale in SCALES:
        cls.at(scale)


def notebook_name(notebook: Settings | type[Settings] | str) -> str:
    """A notebook's name from its settings (an object or its class) or the name itself."""
    return notebook if isinstance(notebook, str) else notebook.notebook


def registered() -> tuple[type[Settings], ...]:
    """Every notebook settings class imported so far, in notebook order, each checked once.

    A class registers itself by defining ``notebook`` (:meth:`Settings.__init_subclass__`); the
    chapters' classes are all imported by :mod:`tutorial_lib.methods`, whose ``NOTEBOOK_SETTINGS``
    is this tuple."""
    for cls in _REGISTRY.values():
        if cls not in _CHECKED:
            _check(cls)
            _CHECKED.add(cls)
    return tuple(cls for _, cls in sorted(_REGISTRY.items()))


