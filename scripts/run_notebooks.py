"""Execute every notebook in order at one scale and write the results report.

At classroom scale (the default) notebooks are executed *in place*, so the committed notebooks
carry the outputs of this run; at any other scale the executed copies go to
``results/<scale>/notebooks/`` unless ``--inplace`` is given. Each notebook saves its tables
through ``tutorial_lib.results``; this script gathers tables, wall times and reference numbers
into ``results/<scale>/RESULTS.md``, which says where each figure lies in the executed notebook
(none is copied beside it: issue 63).

**Nothing good is lost.** Each notebook runs into a staging folder ``results/<scale>/.staging/
<notebook>/`` (``TUTORIAL_RESULTS_DIR`` points there, so ``results.save`` writes there; the
executed notebook goes there too). Only when the notebook finished without error are its
outputs swapped in (the executed notebook, ``<notebook>.json``, its wall time). A notebook that
fails (an exception in a cell, a dead kernel, a cell timeout) or is interrupted (Ctrl-C,
SIGTERM) leaves its previous outputs byte-identical; its failed execution is moved to
``results/<scale>/failed/<notebook>/`` (with ``failure.json``: the one-line error, when) for
reading, as a record (what it printed and its traceback; its figures stripped:
``scripts/strip_outputs.py``), and the report says in its section that it failed, why, and that
the results shown are the last good ones, with their date. A failure stays in the report until
the notebook runs without error again. The job goes on to the next notebook (an interruption
stops it); the exit status is then 1 (130 when interrupted). ``RESULTS.md``, ``effects.json``
and ``wall_times.json`` are rewritten only when some notebook's outputs were swapped in (or with
``--report-only``); when none was, the report naming the failures goes to
``results/<scale>/failed/RESULTS.md``, so a failed run changes nothing but ``failed/``.

``--resume`` continues an interrupted (or partly failed) job: it skips every notebook that
finished without error after the last change to anything it depends on, and runs the rest.
A notebook depends on its own ``.ipynb``, on every ``tutorial_lib`` source file, and on the
notebooks named in ``DEPENDS_ON`` (by default 01_pretraining, which fills the cache of pretrained
models every later notebook loads): when one of those ran after it, it runs again. When each
notebook finished, and whether it failed, is kept in ``results/<scale>/main_job_state.json``.
``--only 02 03`` executes those notebooks; the report still has every notebook's section (the
others from earlier runs, said to be so).

    python scripts/run_notebooks.py [--scale classroom] [--only 01 02] [--out DIR] [--resume]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "scripts"))  # strip_outputs, also when loaded by path (the tests)
import strip_outputs  # noqa: E402

from tutorial_lib import config, results  # noqa: E402
from tutorial_lib.ops import report as reports  # noqa: E402
from tutorial_lib.runtime import atomic_write  # noqa: E402

STATE_NAME = "main_job_state.json"
STAGING_DIR = ".staging"  # per notebook, until it finished without error (git-ignored)
INTERRUPTED = "KeyboardInterrupt: the job was interrupted (Ctrl-C or SIGTERM)"
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


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back for the duration (delivered after it): a swap is never cut."""
    held = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def _show(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


class _Stop:
    """What the signal handler needs: the notebook client running now, and whether a stop was
    asked for (the first Ctrl-C or SIGTERM interrupts the kernel, the second the job at once)."""

    client: NotebookClient | None = None
    requested = False


def _kernel_pid(client: NotebookClient) -> int | None:
    provisioner = getattr(getattr(client, "km", None), "provisioner", None)
    return getattr(provisioner, "pid", None)


def _stop(signum: int, frame: object) -> None:
    """Ctrl-C / SIGTERM: interrupt the running cell (the kernel raises KeyboardInterrupt, nbclient
    reports it and shuts the kernel down); outside a notebook, or the second time, stop now."""
    pid = _kernel_pid(_Stop.client) if _Stop.client is not None else None
    if pid is None or _Stop.requested:
        raise KeyboardInterrupt(f"signal {signum}")
    _Stop.requested = True
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGINT)


PEAK_MEMORY = reports.PEAK_MEMORY_NAME  # per notebook: its kernel's peak memory (memory_probe)
PROBE_ID = "main-job-peak-memory"


def memory_probe(path: Path) -> nbformat.NotebookNode:
    """A last cell the main job appends to a notebook (and removes from the executed copy): the
    kernel writes its whole run's peak memory to ``path`` (``runtime.process_peak_memory``: CUDA
    tensors and the caching allocator's reservation on a GPU, the peak RSS everywhere)."""
    cell = nbformat.v4.new_code_cell(
        f"from tutorial_lib.runtime import write_process_peak_memory\n"
        f"write_process_peak_memory({str(path)!r})")
    cell.id = PROBE_ID
    return cell


def run(notebook: Path, destination: Path, timeout: int,
        probe: Path | None = None) -> tuple[float, nbformat.NotebookNode, str | None]:
    """Execute ``notebook``, write it to ``destination`` (also when a cell fails or the run is
    interrupted) and return (seconds, the executed notebook, the error or None). With ``probe``,
    the kernel's peak memory is written there after the last cell (:func:`memory_probe`: a few
    milliseconds; the cell is not kept in the executed notebook).

    nbclient runs in a worker thread: there it installs no signal handlers of its own (in the main
    thread it would swallow Ctrl-C and SIGTERM, kill the kernel and let the job go on), so the
    signals reach :func:`_stop` and interrupt the job."""
    nb = nbformat.read(notebook, as_version=4)
    if probe is not None:
        nb.cells.append(memory_probe(probe))
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    raised: list[BaseException] = []

    def execute() -> None:
        try:
            asyncio.run(client.async_execute())
        except BaseException as err:  # a failing cell, a dead kernel, a timeout: reported
            raised.append(err)

    start = time.perf_counter()
    _Stop.client, _Stop.requested = client, False
    worker = threading.Thread(target=execute, name=f"execute {notebook.name}", daemon=True)
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:  # a second signal (or one before the kernel ran): stop it now
        _Stop.requested = True
        with contextlib.suppress(OSError, TypeError):
            os.kill(_kernel_pid(client), signal.SIGKILL)
        worker.join(10)
    finally:
        _Stop.client = None
    seconds = time.perf_counter() - start
    if nb.cells and nb.cells[-1].get("id") == PROBE_ID:
        nb.cells.pop()
    error = INTERRUPTED if _Stop.requested else _short(raised[0]) if raised else None
    destination.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, destination)
    return seconds, nb, error


def read_peak(path: Path) -> dict | None:
    """The peak memory a kernel wrote (:func:`memory_probe`), or None when it wrote none."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def record_entry(path: Path, stem: str, value: object | None) -> None:
    """Set one notebook's entry of a ``{notebook: value}`` file (``wall_times.json``,
    ``peak_memory.json``), re-read first: another invocation may have recorded its notebooks.
    None removes the entry, so no stale number stays beside a new run."""
    try:
        entries = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:  # cut short: the other notebooks' entries come back with their next run
        entries = {}
    entries.pop(stem, None)
    if value is not None:
        entries[stem] = value
    atomic_write(path, json.dumps(dict(sorted(entries.items())), indent=1))


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


# --- staging: a notebook's outputs replace the last good ones only when it finished -----------


def _move(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(source, target)  # a rename (atomic per file) on one file system


def swap_in(stage: Path, out: Path, notebook: Path, executed: Mapping, destination: Path,
            strip: bool = False) -> list[str]:
    """Move a notebook's outputs from ``stage`` into place: the executed notebook to
    ``destination`` and ``<notebook>.json`` into ``out`` (an older ``.json`` goes when this run
    saved none). No figure is copied out of the notebook: the report points to them in it
    (issue 63). ``strip``: a record, not a lesson: the executed notebook keeps only what was
    printed (``scripts/strip_outputs.py``). Returns where the kept notebook's figures lie
    (:func:`tutorial_lib.ops.report.notebook_figures`)."""
    stem = notebook.stem
    if strip:
        strip_outputs.strip_file(stage / notebook.name)
    _move(stage / notebook.name, destination)
    saved = stage / f"{stem}.json"
    if saved.exists():
        _move(saved, out / saved.name)
    else:  # finished, saved nothing: no stale numbers (the report says it saved none)
        (out / saved.name).unlink(missing_ok=True)
    shutil.rmtree(stage, ignore_errors=True)
    return [] if strip else reports.notebook_figures(executed)


def keep_failed(stage: Path, out: Path, notebook: Path, error: str, seconds: float) -> Path:
    """Move a failed execution (the notebook as far as it ran, whatever it saved) from ``stage`` to
    ``out/failed/<notebook>/`` with its ``failure.json``; the last good outputs are not touched.
    The failed notebook is a record (what it printed, its traceback): its rich outputs are
    stripped (``scripts/strip_outputs.py``; a committed one travels with every device call)."""
    if (stage / notebook.name).is_file():
        with contextlib.suppress(OSError, ValueError):  # cut short: kept as it is
            strip_outputs.strip_file(stage / notebook.name)
    target = reports.failed_dir(out, notebook.stem)
    shutil.rmtree(target, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(stage, target)
    reports.record_failure(out, notebook.stem, error, seconds)
    return target


def git_ignored(paths: Iterable[Path]) -> set[Path]:
    """Those of ``paths`` that git ignores (no clone has them: the report links none of them,
    e.g. the held-out run's executed copies, kept outside the tree, issue 63); none outside a
    git work tree."""
    paths = list(paths)
    if not paths:
        return set()
    try:
        done = subprocess.run(["git", "check-ignore", "-z", "--stdin"], cwd=ROOT, capture_output=True,
                              input=b"\0".join(os.fsencode(p) for p in paths), timeout=60)
    except (OSError, subprocess.SubprocessError):
        return set()
    return {Path(os.fsdecode(p)) for p in done.stdout.split(b"\0") if p} if done.returncode == 0 else set()


def write_report(out: Path, notebooks: Sequence[Path], destination: Mapping[str, Path],
                 this_run: Sequence[str], at: Path) -> Path:
    """Write ``RESULTS.md`` into ``at`` (``out``, or ``out/failed`` when nothing was swapped in);
    into ``out`` also ``effects.json``, and an older ``failed/RESULTS.md`` goes."""
    names = [nb.stem for nb in notebooks]
    times_path = out / "wall_times.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    there = {stem: dest for stem, dest in destination.items() if dest.exists()}
    hidden = git_ignored(there.values())
    links = {stem: Path(os.path.relpath(dest, at)).as_posix()
             for stem, dest in there.items() if dest not in hidden}
    report = reports.report_markdown(out, names, times, this_run=this_run, links=links, at=at)
    atomic_write(at / reports.REPORT_NAME, report)
    if at == out:
        atomic_write(out / reports.EFFECTS_NAME, json.dumps(reports.effects_of(out, names), indent=1))
        (out / reports.FAILED_DIR / reports.REPORT_NAME).unlink(missing_ok=True)
    return at / reports.REPORT_NAME


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
    parser.add_argument("--strip-rich-outputs", action="store_true", help="executed copies keep "
                        "only what was printed (scripts/strip_outputs.py; not with the committed "
                        "notebooks, whose outputs are the lesson)")
    parser.add_argument("--resume", action="store_true", help="skip the notebooks whose results "
                        "are newer than everything they depend on (an interrupted job goes on)")
    parser.add_argument("--start-within", type=float, metavar="MINUTES", help="start no notebook "
                        "after this many minutes (a time-limited GPU session; --resume goes on)")
    args = parser.parse_args(argv)
    began = time.monotonic()

    scale = config.get_scale(args.scale)
    out = (args.out or ROOT / "results" / scale.name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ[config.SCALE_ENV_VAR] = scale.name
    inplace = args.inplace or (scale.name == "classroom" and args.out is None)
    if inplace and args.strip_rich_outputs:
        parser.error("--strip-rich-outputs strips executed copies, never the committed notebooks "
                     "(their outputs are the lesson): give --out DIR")

    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    selected = [nb for nb in notebooks if not args.only or nb.name[:2] in args.only]
    destination = {nb.stem: nb if inplace else out / "notebooks" / nb.name for nb in notebooks}
    times_path = out / "wall_times.json"
    failures: dict[str, str] = {}
    executed_now: list[str] = []
    swapped: list[str] = []
    interrupted = stopped_early = False
    handlers = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    results_env = os.environ.get(results.RESULTS_ENV_VAR)
    try:
        for nb in [] if args.report_only else selected:
            dest = destination[nb.stem]
            if args.resume:
                reason = why_stale(nb, notebooks, out, read_state(out))
                if reason is None:
                    print(f"[{scale.name}] {nb.name}: up to date, skipped (--resume)", flush=True)
                    continue
                print(f"[{scale.name}] {nb.name}: runs again ({reason})", flush=True)
            if args.start_within is not None and time.monotonic() - began > 60 * args.start_within:
                print(f"[{scale.name}] {nb.name}: not started, past --start-within "
                      f"{args.start_within:g} min (run again with --resume)", flush=True)
                stopped_early = True
                break
            executed_now.append(nb.stem)
            stage = out / STAGING_DIR / nb.stem
            shutil.rmtree(stage, ignore_errors=True)
            stage.mkdir(parents=True)
            os.environ[results.RESULTS_ENV_VAR] = str(stage)  # the kernel saves its tables here
            print(f"[{scale.name}] {nb.name} ...", flush=True)
            with cpu_lock(args.cpu_lock):
                seconds, executed, error = run(nb, stage / nb.name, args.timeout,
                                               probe=stage / PEAK_MEMORY)
            if error:
                with signals_held():
                    kept = keep_failed(stage, out, nb, error, seconds)
                    record_state(out, nb.stem, ok=False, finished=time.time())
                failures[nb.stem] = error
                print(f"[{scale.name}] {nb.name} FAILED after {seconds:.0f} s: {error}\n"
                      f"    its last good outputs are kept; this execution is in {_show(kept)}",
                      flush=True)
                if error == INTERRUPTED:
                    interrupted = True
                    break
                continue
            peak = read_peak(stage / PEAK_MEMORY)
            with signals_held():
                figures = swap_in(stage, out, nb, executed, dest, strip=args.strip_rich_outputs)
                record_entry(out / PEAK_MEMORY, nb.stem, peak)
                record_entry(times_path, nb.stem, round(seconds, 1))
                reports.clear_failure(out, nb.stem)
                record_state(out, nb.stem, ok=True,
                             finished=max(time.time(), dest.stat().st_mtime))
                swapped.append(nb.stem)
            print(f"[{scale.name}] {nb.name} done in {seconds:.0f} s -> {_show(dest)} "
                  f"({len(figures)} figures)", flush=True)
    except KeyboardInterrupt:  # between notebooks: every swap is whole (signals are held)
        interrupted = True
        print(f"[{scale.name}] interrupted", flush=True)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        if results_env is None:  # as it was: the caller's kernels save where they did before
            os.environ.pop(results.RESULTS_ENV_VAR, None)
        else:
            os.environ[results.RESULTS_ENV_VAR] = results_env
        with contextlib.suppress(OSError):
            (out / STAGING_DIR).rmdir()

    this_run = (executed_now if args.resume or interrupted or stopped_early
                else [nb.stem for nb in selected])
    if args.report_only or swapped or not (out / reports.REPORT_NAME).exists():
        report = write_report(out, notebooks, destination, this_run, at=out)
    elif failures:  # nothing new to show: the committed report stays as it was
        report = write_report(out, notebooks, destination, this_run, at=out / reports.FAILED_DIR)
    else:
        report = out / reports.REPORT_NAME
        print("report unchanged (no notebook ran)")
    print(f"report: {_show(report)}")
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
    return 130 if interrupted else 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
