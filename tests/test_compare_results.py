"""scripts/compare_results.py, the refactoring check: timings never count, any number does."""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_results", REPO / "scripts" / "compare_results.py")
compare_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_results)


def saved(directory: Path, error: float, seconds: float) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    blob = {"notebook": "04_x", "date": str(seconds), "environment": f"cpu {seconds}",
            "tables": {"runs": {"markdown": f"| {seconds} |", "records": [
                {"method": "a", "test_error": error, "seconds": seconds, "seconds_per_epoch": seconds,
                 "peak_mib": seconds, "cached": seconds > 1}]}},
            "effects": [{"delta": error, "p": 0.5}]}
    (directory / "04_x.json").write_text(json.dumps(blob))
    return directory


def test_timings_memory_and_dates_never_count_numbers_always_do(tmp_path, capsys):
    before = saved(tmp_path / "a", 0.25, 1.0)
    assert compare_results.main([str(before), str(saved(tmp_path / "b", 0.25, 9.0))]) == 0
    assert compare_results.main([str(before), str(saved(tmp_path / "c", 0.26, 1.0))]) == 1
    out = capsys.readouterr().out
    assert "DIFF  04_x" in out and "/tables/runs/records[0]/test_error: 0.25 != 0.26" in out
    assert compare_results.main([str(before), str(tmp_path / "empty")]) == 1  # a missing notebook
