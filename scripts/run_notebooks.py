"""Execute every notebook in order at one scale and write the results report.

At classroom scale (the default) notebooks are executed *in place*, so the committed notebooks
carry the outputs of this run; at any other scale the executed copies go to
``results/<scale>/notebooks/`` unless ``--inplace`` is given. Each notebook saves its tables
through ``tutorial_lib.results``; this script extracts each executed notebook's figures into
``results/<scale>/figures/`` and gathers tables, figures, wall times and reference numbers into
``results/<scale>/RESULTS.md``. A notebook that fails is reported there and the job goes on to the
next; the exit status is then 1. A notebook's saved results are only removed when that notebook
itself runs again, so a crash never costs another notebook's results.

``--resume`` continues an interrupted (or partly failed) job: it skips every notebook that
finished without error after the last change to anything it depends on, and runs the rest.
A notebook depends on its own ``.ipynb``, on every ``tutorial_lib`` source file, and on the
notebooks named in ``DEPENDS_ON`` (by default 01_pretraining, which fills the cache of pretrained
models every later notebook loads): when one of those ran after it, it runs again. When each
notebook finished, and whether it failed, is kept in ``results/<scale>/main_job_state.json``.

    python scripts/run_notebooks.py [--scale classroom] [--only 01 02] [--out DIR] [--resume]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tutorial_lib import config, results  # noqa: E402

STATE_NAME = "main_job_state.json"
# notebook number -> the notebooks whose results (the cache they fill) it uses; not listed: ("01",)
DEPENDS_ON: dict[str, tuple[str, ...]] = {"01": ()}


def _short(err: BaseException) -> str:
    """One line for the report: a cell error's name and value, else the exception."""
    if hasattr(err, "ename"):
        text = f"{err.ename}: {getattr(err, 'evalue', '')}"
    else:
        text = f"{type(err).__name__}: {err}"
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


def _show(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def run(notebook: Path, destination: Path, timeout: int) -> tuple[float, nbformat.NotebookNode, str | None]:
    """Execute ``notebook``, write it to ``destination`` (also when a cell fails) and return
    (seconds, the executed notebook, the error or None)."""
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except Exception as err:  # a failing cell, a dead kernel, a timeout: reported, job goes on
        error = _short(err)
    seconds = time.perf_counter() - start
    destination.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, destination)
    return seconds, nb, error


# --- resuming an interrupted job ----------------------------------------------------------------


def read_state(out: Path) -> dict[str, dict]:
    """``{notebook: {"ok": bool, "finished": unix time}}`` of the runs recorded in ``out``."""
    path = out / STATE_NAME
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except ValueError:  # a state file cut short: nothing counts as finished, all run again
        return {}


def record_state(out: Path, stem: str, ok: bool, finished: float) -> None:
    """Record one notebook's run, merged with what other invocations recorded meanwhile."""
    state = {**read_state(out), stem: {"ok": ok, "finished": finished}}
    tmp = out / f".{STATE_NAME}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, out / STATE_NAME)


def dependencies(notebook: Path, notebooks: Sequence[Path]) -> list[Path]:
    """The notebooks whose results ``notebook`` uses (see ``DEPENDS_ON``)."""
    wanted = DEPENDS_ON.get(notebook.name[:2], ("01",))
    return [nb for nb in notebooks if nb.name[:2] in wanted and nb != notebook]


def input_files(notebook: Path) -> list[Path]:
    """The files a notebook's results depend on: itself and the library's sources."""
    return [notebook, *sorted((ROOT / "tutorial_lib").rglob("*.py"))]


def why_stale(notebook: Path, notebooks: Sequence[Path], out: Path,
              state: Mapping[str, dict]) -> str | None:
    """Why ``notebook`` must run again (a short reason), or None when its results are current:
    it finished without error after the last change to every file and notebook it depends on."""
    record = state.get(notebook.stem)
    if not record:
        return "no finished run recorded"
    if not record.get("ok"):
        return "failed last time"
    if not (out / f"{notebook.stem}.json").exists():
        return "its results are missing"
    finished = float(record["finished"])
    for path in input_files(notebook):
        if path.exists() and path.stat().st_mtime > finished:
            return f"{_show(path)} changed after it ran"
    for dep in dependencies(notebook, notebooks):
        dep_record = state.get(dep.stem)
        if not dep_record or not dep_record.get("ok") or float(dep_record["finished"]) > finished:
            return f"{dep.stem} ran again after it"
    return None


@contextlib.contextmanager
def cpu_lock(path: Path | None) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` for the duration (nothing when ``path`` is None)."""
    if path is None:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default=os.environ.get(config.SCALE_ENV_VAR, "classroom"))
    parser.add_argument("--only", nargs="*", help="notebook number prefixes, e.g. 01 02")
    parser.add_argument("--out", type=Path, help="results directory (default results/<scale>)")
    parser.add_argument("--inplace", action="store_true", help="overwrite the notebooks")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per cell")
    parser.add_argument("--report-only", action="store_true", help="execute nothing; rebuild "
                        "the report from the saved results (--only: the notebooks of this job)")
    parser.add_argument("--cpu-lock", type=Path, help="hold this lock file (flock) while each "
                        "notebook runs, so other jobs that take it only run between notebooks")
    parser.add_argument("--resume", action="store_true", help="skip the notebooks whose results "
                        "are newer than everything they depend on (an interrupted job goes on)")
    args = parser.parse_args(argv)

    scale = config.get_scale(args.scale)
    out = (args.out or ROOT / "results" / scale.name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ[config.SCALE_ENV_VAR] = scale.name
    os.environ[results.RESULTS_ENV_VAR] = str(out)
    inplace = args.inplace or (scale.name == "classroom" and args.out is None)

    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    selected = [nb for nb in notebooks if not args.only or nb.name[:2] in args.only]
    destination = {nb.stem: nb if inplace else out / "notebooks" / nb.name for nb in notebooks}
    times_path = out / "wall_times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    failures: dict[str, str] = {}
    executed_now: list[str] = []
    for nb in [] if args.report_only else selected:
        dest = destination[nb.stem]
        if args.resume:
            reason = why_stale(nb, notebooks, out, read_state(out))
            if reason is None:
                print(f"[{scale.name}] {nb.name}: up to date, skipped (--resume)", flush=True)
                continue
            print(f"[{scale.name}] {nb.name}: runs again ({reason})", flush=True)
        executed_now.append(nb.stem)
        # No stale numbers or figures: if this run fails, its section says so.
        (out / f"{nb.stem}.json").unlink(missing_ok=True)
        results.clear_figures(out, nb.stem)
        print(f"[{scale.name}] {nb.name} ...", flush=True)
        with cpu_lock(args.cpu_lock):
            seconds, executed, error = run(nb, dest, args.timeout)
        # re-read before writing: another invocation may have recorded its notebooks meanwhile
        times = {**(json.loads(times_path.read_text()) if times_path.exists() else {}),
                 **times, nb.stem: round(seconds, 1)}
        times_path.write_text(json.dumps(times, indent=1))
        record_state(out, nb.stem, ok=error is None,
                     finished=max(time.time(), dest.stat().st_mtime if dest.exists() else 0.0))
        if error:
            failures[nb.stem] = error
            print(f"[{scale.name}] {nb.name} FAILED after {seconds:.0f} s: {error}", flush=True)
            continue
        figures = results.save_figures(executed, out, nb.stem)
        print(f"[{scale.name}] {nb.name} done in {seconds:.0f} s -> {_show(dest)} "
              f"({len(figures)} figures)", flush=True)

    links = {stem: Path(os.path.relpath(dest, out)).as_posix()
             for stem, dest in destination.items() if dest.exists()}
    this_run = executed_now if args.resume else [nb.stem for nb in selected]
    report = results.report_markdown(out, [nb.stem for nb in notebooks], times,
                                     this_run=this_run, failures=failures, links=links)
    (out / results.REPORT_NAME).write_text(report)
    (out / results.EFFECTS_NAME).write_text(json.dumps(results.effects_of(out, [nb.stem for nb in notebooks]),
                                                       indent=1))
    print(f"report: {_show(out / results.REPORT_NAME)}")
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
