"""03's computed reading (readings.what_to_train) on small tables; on the committed run's tables it is
read number by number in tests/test_numbers.py."""

import pandas as pd

from tutorial_lib.methods.adaptation import readings


def _tables(cached: bool):
    summary = pd.DataFrame(
        {"test_error (mean ± std)": ["4.00 ± 0.10 %", "5.00 ± 0.50 %"], "% trained": [48.4, 0.4],
         "optimizer state (MiB)": [125.83, 1.04], "seconds / epoch": [38.0, 28.5]},
        index=["full fine-tuning", "adapters m=8"])
    comparison = pd.DataFrame(
        {"Δ (points)": [0.0, 1.0], "95% CI": ["", "[-0.50, +2.50]"], "p": [float("nan"), 0.125],
         "verdict": ["(baseline)", "within noise"], "MDE": [float("nan"), 3.0]},
        index=["full fine-tuning", "adapters m=8"])
    runs = pd.DataFrame({"method": ["full fine-tuning", "adapters m=8"], "cached": [cached, False]})
    return summary, comparison, comparison.iloc[:0], runs


def test_the_bar_is_judged_on_the_ci_and_the_numbers_follow_the_rounding_rule():
    text = readings.what_to_train(*_tables(cached=True), largest_weight="layer 6")
    assert "adapters m=8 trains 0.40 % of the parameters and ends +1.00 points of error" in text
    assert "p = 0.125" in text  # half to even: 0.125 stays 0.125 at three decimals
    assert "not shown inside the 2-point / 5 % bar" in text  # +1.00, but the CI reaches +2.50
    assert "(MDE 3.00 points; |Δ| ≤ 2.50)" in text and "not compared" in text


def test_measured_times_are_given_when_nothing_came_from_the_cache():
    text = readings.what_to_train(*_tables(cached=False), largest_weight="layer 6")
    assert ("Seconds per epoch (one run each, not tested): full fine-tuning 38.00 s, adapters m=8 28.50 s"
            in text)
    assert "Feature extraction" not in text
