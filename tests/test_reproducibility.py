"""Same seeds, empty caches, CPU: the same result tables.

Notebook 02's computation for its pretrained backbone (tokenizer → pretrained causal LM →
fine-tuning with each of the scale's seeds → summary table) is run twice at smoke scale, each
time from an empty cache, and saved with ``results.save`` as the notebook does. Every number
must be equal — only wall times and the date may differ. Before the deterministic tokenizer the
two caches held tokenizers with other ids, hence other pretrained models and other errors.
"""

import json

import pytest

from tutorial_lib import config, finetuning, pretraining, results, stats, tasks
from tutorial_lib.methods.adaptation.settings import AdaptationSettings

TIMING = ("seconds", "mean seconds / run", "seconds_per_epoch")


def notebook_02_tables(scale: config.Scale, backbones=("ours",)) -> dict:
    """Notebook 02's saved tables for ``backbones``, as ``results.save`` writes them."""
    settings = AdaptationSettings.at(scale)
    pretraining.ensure(scale, *backbones)  # as the notebook's setup does
    task = tasks.load_task("trec", train_examples=settings.train_examples,
                           validation_examples=settings.validation_examples,
                           test_examples=settings.test_examples)
    table, _ = finetuning.compare_methods({b: {"backbone": b} for b in backbones}, task,
                                          settings.budget, scale=scale, backbone=backbones[0],
                                          seeds=settings.seeds)
    summary = stats.summarize(table, by="method")
    summary["mean seconds / run"] = table.groupby("method", sort=False)["seconds"].mean()
    summary = summary.drop(columns=["mean", "std"])
    path = results.save("02_adaptation", {"TREC-6 test error": summary, "runs": table}, scale=scale,
                        seeds=results.seeds_of(table, by="method"))
    return json.loads(path.read_text())


def without_timing(blob: dict) -> dict:
    return {name: [{k: v for k, v in row.items() if k not in TIMING} for row in table["records"]]
            for name, table in blob["tables"].items()}


def test_two_runs_from_empty_caches_give_identical_result_tables(with_data, tmp_path, monkeypatch):
    scale = config.get_scale("smoke")
    blobs = []
    for run in ("first", "second"):
        monkeypatch.setenv(config.CACHE_ENV_VAR, str(tmp_path / run / "cache"))
        monkeypatch.setenv(results.RESULTS_ENV_VAR, str(tmp_path / run / "results"))
        blobs.append(notebook_02_tables(scale))
    first, second = blobs
    seeds = list(AdaptationSettings.at(scale).seeds)
    assert first["seeds"] == second["seeds"] == seeds
    assert without_timing(first) == without_timing(second)
    runs = without_timing(first)["runs"]
    assert len(runs) == len(seeds) and all(0 < r["test_error"] < 1 for r in runs)
    tokenizers = [next((tmp_path / run / "cache" / "smoke").glob("tokenizer-*")) / "tokenizer.json"
                  for run in ("first", "second")]
    assert tokenizers[0].read_bytes() == tokenizers[1].read_bytes()


@pytest.mark.parametrize("column", TIMING)
def test_only_timings_are_left_out_of_the_comparison(column):
    blob = {"tables": {"t": {"records": [{"test_error": 0.5, column: 1.0}]}}}
    assert without_timing(blob) == {"t": [{"test_error": 0.5}]}
