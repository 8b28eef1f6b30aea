"""Tests for tutorial_lib.settings: every notebook's settings class, found by class at every scale."""

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from tutorial_lib import backbones, config, settings, tasks
from tutorial_lib.methods import NOTEBOOK_SETTINGS
from tutorial_lib.methods.adaptation.settings import AdapterSettings
from tutorial_lib.methods.multitask.settings import MultitaskSettings
from tutorial_lib.methods.probing.settings import AdversarialSettings, AmnesicSettings, ProbingSettings
from tutorial_lib.methods.prompts.settings import DARTSettings
from tutorial_lib.methods.tdt.settings import TDTSettings
from tutorial_lib.ops import prefetch
from tutorial_lib.settings import Budget, Names, TaskName

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_every_notebook_has_one_settings_class_named_after_its_file():
    named = [cls.notebook for cls in NOTEBOOK_SETTINGS]
    assert len(set(named)) == len(named)
    assert named == NOTEBOOKS  # 01's too: PretrainingSettings
    assert all(cls.__name__.endswith("Settings") for cls in NOTEBOOK_SETTINGS)


@pytest.mark.parametrize("cls", NOTEBOOK_SETTINGS, ids=lambda c: c.__name__)
def test_settings_at_every_scale_are_of_their_class_and_sane(cls):
    for name, scale in config.SCALES.items():
        s = cls.at(scale)
        assert type(s) is cls and s == cls.at(name) == cls.at(f" {name.upper()} ")
        budget = getattr(s, "budget", None)
        assert budget is None or isinstance(budget, Budget)
        assert budget is None or budget.epochs >= 1, (cls.__name__, name)
        seeds = getattr(s, "seeds", None)
        assert seeds is None or (len(seeds) >= 1 and len(set(seeds)) == len(seeds))
    assert cls.at("classroom") == cls(), "the defaults are the classroom values"


def test_the_scales_differ_where_their_overrides_say():
    assert DARTSettings.at("smoke").steps == 4 and DARTSettings.at("classroom").steps == 8
    assert DARTSettings.at("paper").backbone == "roberta-large"
    adapters = AdapterSettings.at("smoke")  # Classification's smoke sizes, then its own
    assert (adapters.train_examples, adapters.seeds, adapters.bottlenecks) == (256, (0, 1), (8,))
    assert AdapterSettings.overrides("classroom") == {}


def _redundant() -> list[tuple[str, str, str]]:
    """(class, scale, field) of every override that changes nothing in any class that uses it."""
    out = []
    owners = {k for c in NOTEBOOK_SETTINGS for k in c.__mro__ if "scales" in vars(k)}
    for klass in owners:
        for scale, changes in vars(klass)["scales"].items():
            for key, value in changes.items():
                def without(cls, klass=klass, scale=scale, key=key):
                    values = {f.name: f.default for f in dataclasses.fields(cls)}
                    for k in reversed(cls.__mro__):
                        own = dict(vars(k).get("scales", {}).get(scale, {}))
                        if k is klass:
                            own.pop(key)
                        values.update(own)
                    return values[key]
                users = [c for c in NOTEBOOK_SETTINGS if klass in c.__mro__]
                if all(without(c) == value for c in users):
                    out.append((klass.__name__, scale, key))
    return sorted(out)


def test_scales_hold_only_the_differences():
    assert _redundant() == []


def test_a_misspelt_field_or_scale_in_the_overrides_fails_at_construction():
    @dataclass(frozen=True)
    class Typo(DARTSettings):
        scales: ClassVar[settings.Overrides] = {"smoke": {"stepz": 3}}

    with pytest.raises(config.ConfigError, match=r"Typo.scales sets no field\(s\) \['stepz'\]"):
        Typo.at("smoke")
    assert Typo.at("classroom").steps == DARTSettings.steps
    with pytest.raises(config.ConfigError, match="unknown scale 'huge'"):
        DARTSettings.at("huge")

    @dataclass(frozen=True)
    class NoSuchScale(DARTSettings):
        scales: ClassVar[settings.Overrides] = {"laptop": {"steps": 3}}

    with pytest.raises(config.ConfigError, match=r"names no scale\(s\) \['laptop'\]"):
        settings._check(NoSuchScale)


def test_replace_with_a_misspelt_name_names_the_valid_settings():
    s = AdapterSettings.at("smoke")
    with pytest.raises(config.ConfigError) as err:
        s.replace(bottelnecks=(4,))
    message = str(err.value)
    assert "bottelnecks" in message
    for valid in ("bottlenecks", "probe_epochs", "epochs", "lr"):  # its own and the budget's
        assert valid in message
    with pytest.raises(config.ConfigError, match="epochs"):
        Budget().replace(epoch=3)
    with pytest.raises(config.ConfigError, match="its settings"):  # no budget to reach into
        ProbingSettings.at("smoke").replace(epochs=3)


def test_replace_reaches_into_the_budget_and_leaves_the_original_alone():
    s = AdapterSettings.at("smoke")
    changed = s.replace(epochs=7, lr=3e-4, bottlenecks=(4,))
    assert isinstance(changed, AdapterSettings)
    assert (changed.budget.epochs, changed.budget.lr, changed.bottlenecks) == (7, 3e-4, (4,))
    assert changed.budget.batch_size == s.budget.batch_size  # the rest of the budget kept
    assert s.budget.epochs == 1 and s.bottlenecks == (8,)  # frozen: the original is unchanged
    whole = s.replace(budget=Budget(epochs=5))
    assert whole.budget == Budget(epochs=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.budget.epochs = 2


# --- typed fields: what prefetch reads ------------------------------------------------------------


def test_fields_naming_tasks_or_backbones_are_found_by_their_type():
    assert {f: m.what for f, m in settings.markers(DARTSettings).items()} == {
        "backbone": "backbone", "cls_backbone": "backbone", "tasks": "task"}
    assert settings.markers(DARTSettings)["backbone"].kinds == ("causal", "masked")
    assert settings.markers(AmnesicSettings)["backbone"].kinds == ("causal", "masked")
    assert set(settings.markers(TDTSettings)) == {"task", "backbone", "transfer", "pair_task"}
    assert settings.markers(MultitaskSettings)["sequential"].what == settings.TASK
    assert list(settings.named(MultitaskSettings.at("smoke"))) == [
        (Names("backbone"), "backbone", "minilm"), (Names("task"), "tasks", "sst2"),
        (Names("task"), "tasks", "mr"), (Names("backbone"), "trec_backbone", "ours"),
        (Names("task"), "sequential", "mnli"), (Names("task"), "sequential", "rte")]

    @dataclass(frozen=True)
    class Teacher(DARTSettings):
        teacher: settings.BackboneName = "minilm"  # a new field: its type is all prefetch needs
        extra: TaskName | None = None

    assert {"teacher", "extra"} <= set(settings.markers(Teacher))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, tuple):
        for inner in value:
            yield from _strings(inner)


def test_every_field_holding_a_task_or_model_name_is_typed_as_one():
    """A field that names a task or a backbone with a plain ``str`` type would not be prefetched."""
    hub = {m for s in config.SCALES for m in prefetch.needs(s).hub_model_names}
    models = {*backbones.OURS, *backbones.LOCAL_MODELS, *hub}
    untyped = []
    for cls in NOTEBOOK_SETTINGS:
        marked = settings.markers(cls)
        for scale in config.SCALES:
            s = cls.at(scale)
            for f in dataclasses.fields(s):
                names = set(_strings(getattr(s, f.name)))
                if names & set(tasks.TASKS) and getattr(marked.get(f.name), "what", None) != "task":
                    untyped.append((cls.__name__, scale, f.name))
                if names & models and getattr(marked.get(f.name), "what", None) != "backbone":
                    untyped.append((cls.__name__, scale, f.name))
    assert untyped == []
    kinds = {k for cls in NOTEBOOK_SETTINGS for m in settings.markers(cls).values() for k in m.kinds}
    assert kinds <= set(backbones.KINDS)


@pytest.mark.parametrize("cls", NOTEBOOK_SETTINGS, ids=lambda c: c.__name__)
def test_every_seed_field_is_typed_so_a_seed_set_moves_it(cls):
    """A field named like a seed (``seeds``, ``*_seed(s)``, ``*splits``) holding ints is typed
    ``Seed``/``Seeds``, and only those are: the held-out run moves it by its type, not its name."""
    import re

    looks = re.compile(r"(.*_)?(seeds?|splits)")
    named_like = {f.name for f in dataclasses.fields(cls) if looks.fullmatch(f.name)
                  and not isinstance(getattr(cls.at("smoke"), f.name), bool)}
    assert set(settings.seed_fields(cls)) == named_like


def test_an_integer_seed_offset_moves_every_typed_seed(monkeypatch):
    monkeypatch.setenv(config.SEEDS_ENV_VAR, "7")
    moved = DARTSettings.at("smoke")
    monkeypatch.delenv(config.SEEDS_ENV_VAR)
    main = DARTSettings.at("smoke")
    assert moved.splits == tuple(s + 7 for s in main.splits) and moved.steps == main.steps


def test_the_settings_table_has_one_row_per_field_and_marks_what_differs_from_classroom():
    smoke = AdversarialSettings.at("smoke").replace(lambda_=0.1)
    table = smoke.table()
    budget_rows = [r for r in table.index if r.startswith("budget.")]
    fields = dataclasses.fields
    assert len(table) == len(fields(AdversarialSettings)) - 1 + len(fields(settings.Budget))
    assert budget_rows and table.loc["budget.epochs", "value"] == repr(smoke.budget.epochs)
    assert table.loc["budget.epochs", "differs from classroom"] == "yes"  # the smoke scale's budget
    assert table.loc["lambda_", "differs from classroom"] == "yes"  # the replace
    assert table.loc["stage_sentences", "differs from classroom"] == "yes"  # the smoke scale
    assert table.loc["backbone", "differs from classroom"] == ""
    assert (AdversarialSettings.at("classroom").table()["differs from classroom"] == "").all()
    assert len(AmnesicSettings().table()) == len(fields(AmnesicSettings))  # no budget: a row a field


def test_settings_keep_the_scale_they_were_made_at_through_replace_and_copies():
    import copy
    import pickle

    from tutorial_lib.methods.prompts.settings import DARTSettings

    smoke = DARTSettings.at("smoke")
    assert smoke.scale is config.get_scale("smoke")
    assert DARTSettings.at(config.get_scale("gpu")).scale.name == "gpu"
    assert smoke.replace(steps=3).scale.name == "smoke"  # replace keeps it
    assert pickle.loads(pickle.dumps(smoke)).scale.name == copy.deepcopy(smoke).scale.name == "smoke"
    assert DARTSettings().scale.name == "classroom"  # the class's defaults are the classroom values
    assert smoke == DARTSettings(**{f.name: getattr(smoke, f.name) for f in dataclasses.fields(smoke)})
