"""tutorial_lib.methods.references: the signs the sources expect, read from their numbers
(``SOURCE_EFFECTS``, in our units) or their claimed directions (``SOURCE_SIGNS``)."""

import pytest

from tutorial_lib.methods import NOTEBOOK_SETTINGS, references
from tutorial_lib.methods.multitask.settings import GradTSSettings, MultitaskSettings

SCORE = "sst2 test score (higher is better)"  # as results.effects writes a higher-is-better metric


def test_a_source_number_gives_its_sign_in_the_metric_s_direction():
    """The slides' 3.4 % vs 3.6 % is an error 0.2 points lower: better. The same Δ on a
    higher-is-better metric would be worse; KD's +0.72 points of accuracy is better."""
    lm = "+ LM loss (1.0 / 0.5)"
    sign, source = references.expected(MultitaskSettings, lm, "classification only", "TREC-6 test error")
    assert sign == "+" and "slides" in source
    assert references.expected(MultitaskSettings, lm, "classification only",
                               "TREC-6 test error (higher is better)")[0] == "-"
    kd = ("13_forgetting_and_distillation", "KD", "hard labels")
    assert references.expected(*kd, "student (2 layers) test accuracy (higher is better)")[0] == "+"
    assert references.expected(*kd, "student (2 layers) test accuracy")[0] == "-"


def test_a_claimed_direction_applies_to_its_comparison_and_metric_only():
    assert references.expected(GradTSSettings, "GradTS-trial", "all tasks", SCORE)[0] == "+"
    assert references.expected("07_gradts", "GradTS-fg", "single-task", SCORE)[0] == "+"
    assert references.expected(GradTSSettings, "random subset", "single-task", SCORE) == ("none", "")
    assert references.expected(GradTSSettings, "all tasks", "GradTS-trial", SCORE) == ("none", "")
    stilts = ("06_multitask", "sequential (mnli → rte)", "single-task")
    assert references.expected(*stilts, "rte test score (higher is better)")[0] == "+"
    assert references.expected(*stilts, SCORE)[0] == "none"  # the claim is RTE's
    assert references.expected(MultitaskSettings, "single-task (equal steps)", "single-task",
                               SCORE)[0] == "none"


def test_with_expected_fills_the_records_and_keeps_an_unclaimed_source():
    records = [{"method": "GradTS-trial", "baseline": "all tasks", "metric": SCORE,
                "expected": "none", "source": "mine"},
               {"method": "random subset", "baseline": "single-task", "metric": SCORE,
                "expected": "none", "source": "mine"}]
    trial, random = references.with_expected(GradTSSettings, records)
    assert trial["expected"] == "+" and trial["source"].startswith("Ma et al. 2021")
    assert random["expected"] == "none" and random["source"] == "mine"
    assert records[0]["expected"] == "none"  # the input is left alone


def test_every_claimed_sign_names_a_notebook_and_marks_recall_unverified():
    names = {c.notebook for c in NOTEBOOK_SETTINGS}
    for claim in references.SOURCE_SIGNS:
        assert claim.notebook in names and claim.sign in ("+", "-"), claim
        if "recalled" in claim.source.lower():
            assert not claim.verified, claim
    keys = [(c.notebook, c.method, c.baseline, c.metric) for c in references.SOURCE_SIGNS]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("value", ["3.4", "3.6"])
def test_06_holds_the_slides_own_numbers_with_their_epochs(value):
    table = references.table(MultitaskSettings)
    row = table[table["value"] == f"{value} %"]
    assert len(row) == 1 and row["verified?"].item() == "yes"
    assert "epochs" in row["note"].item()


def test_the_dart_numbers_have_one_copy():
    """09's paper numbers live in ``prompts.papers.PAPER_K16``; the catalogue's entries are read
    from it, so both say the same (e.g. DART on SST-2: 93.5 (0.5))."""
    from tutorial_lib.methods.prompts.papers import PAPER_K16

    dart = {r.what: r.value for r in references.for_notebook("09_dart") if r.value.endswith(")")}
    assert len(dart) == 3 * len(PAPER_K16)
    assert dart["DART, SST-2"] == "93.5 (0.5)" == "{:.1f} ({:.1f})".format(*PAPER_K16["DART"]["sst2"])
