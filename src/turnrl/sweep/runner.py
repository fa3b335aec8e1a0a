"""Running a sweep: the planned runs as ``turnrl sft`` / ``turnrl train`` processes, at most
``jobs`` at once, resumable.

- **Shared SFT starts.** Runs with one SFT key (:func:`turnrl.sweep.recipe.sft_key`) wait
  for one ``turnrl sft`` run (``<out>/../sft/sft-<key>``) and start RL from its model
  (``model.path=<its sft_model> sft.enabled=false eval.before_training=false``); its
  evaluation is their "before". The key hashes everything SFT and that evaluation read, so
  ``<out>/../sft`` (``sweeps/sft``) is shared by every recipe: two recipes on one env and
  SFT train each start once.
- **Resumable.** A run with a record (``<results>/records/<name>.json``) is done; its
  overrides and its whole resolved config (``config_key``: the base config may have been
  edited) must equal the planned ones, or the sweep stops and says which differ. A run
  directory without ``eval.json`` continues with ``turnrl train --resume`` (from its newest
  checkpoint, else from the start). A finished SFT run is reused.
- **Threads.** Each process gets ``run.threads = threads`` (default ``max(1, cpus // jobs)``;
  not part of a run's identity, so a sweep can resume with another value) unless the recipe
  or the overrides set ``run.threads``.
- **Logs.** Each process writes ``<out>/logs/<name>.log``; a failed one is reported with
  its log's last line, and the runs that need a failed SFT start fail with it.
- **Stopping.** Ctrl-C (or SIGTERM) sends SIGTERM to every running process (a run saves a
  checkpoint; SIGINT would not do: a sweep started in the background by a shell has SIGINT
  ignored, and its processes inherit that), waits for them, writes the table and exits; the
  next call resumes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from turnrl.io import atomic_write_text
from turnrl.sweep import records
from turnrl.sweep.recipe import PlannedRun, Recipe, RecipeError

__all__ = ["SweepOutcome", "run_sweep"]

STOP_WAIT_S = 120  # how long stopped processes get to save a checkpoint


@dataclass
class _Task:
    name: str
    label: str  # what the progress lines call it
    command: list[str]
    needs: str | None = None  # the SFT task that must finish first
    is_sft: bool = False
    finish: Callable[[float], None] = lambda seconds: None  # after a zero exit (its seconds)
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    log: Path = field(default_factory=Path)


@dataclass
class SweepOutcome:
    """What a sweep call did."""

    done: int  # runs with a record (before and now)
    ran: list[str]  # runs finished by this call
    failed: dict[str, str]  # task → why (its log's last line)
    interrupted: bool = False


def _turnrl(*args: str) -> list[str]:
    return [sys.executable, "-m", "turnrl", *args]


def _tail(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1].strip()[:300] if lines else "empty log"


def _check_record(recipe: Recipe, run: PlannedRun, record: dict) -> None:
    if list(record["overrides"]) != list(run.overrides):
        raise RecipeError(
            f"{recipe.path}: the record of {run.name} was made with different overrides "
            f"({record['overrides']} vs now {list(run.overrides)}); give this sweep another "
            "--out and --results, or delete the old records to re-run them")
    if record.get("config_key", run.config_key) != run.config_key:  # older records lack it
        raise RecipeError(
            f"{recipe.path}: the record of {run.name} was made from another config (its base "
            f"config {recipe.config!r} has changed since); give this sweep another --out and "
            "--results, or delete the old records to re-run them")


def _fresh(run_dir: Path) -> bool:
    """Make way for a fresh start: True when ``run_dir`` can be resumed instead (it has a
    ``config.yaml``), else remove whatever an early death left there."""
    if (run_dir / "config.yaml").is_file():
        return False
    shutil.rmtree(run_dir, ignore_errors=True)
    return True


class _Sweep:
    def __init__(self, recipe: Recipe, runs: list[PlannedRun], *, out: Path, results: Path,
                 jobs: int, threads: int | None, git: str | None) -> None:
        self.recipe, self.out, self.results, self.jobs, self.git = recipe, out, results, jobs, git
        self.sft_dir = out.parent / "sft"
        self.base = recipe.config_path()
        self.records = records.read_records(results)
        self.tasks: list[_Task] = []
        self.sft_before: dict[str, tuple[dict[str, float], float]] = {}
        self.threads = threads or max(1, (os.cpu_count() or 1) // jobs)
        for run in runs:
            if run.name in self.records:
                _check_record(recipe, run, self.records[run.name])
        # seed by seed (every cell's seed 0 first), so results arrive for every cell at once;
        # an SFT task goes just before the first run that needs it, and a free slot takes the
        # first task that is ready: runs whose start is done go before later seeds' SFT
        order = {name: i for i, name in enumerate(dict.fromkeys(r.cell.name for r in runs))}
        pending = sorted((run for run in runs if run.name not in self.records),
                         key=lambda run: (run.seed, order[run.cell.name]))
        for run in pending:
            if run.sft_key is not None and run.sft_key not in self.sft_before and \
                    run.sft_key not in {t.name for t in self.tasks}:
                self._add_sft(run)
            self._add_run(run)

    def _config_args(self) -> list[str]:
        return [str(self.base)] if self.base is not None else []

    def _threads(self, run: PlannedRun) -> list[str]:
        if any(item.startswith("run.threads=") for item in run.overrides):
            return []
        return [f"run.threads={self.threads}"]

    def _sft_dir(self, key: str) -> Path:
        return self.sft_dir / f"sft-{key}"

    def _add_sft(self, run: PlannedRun) -> None:
        key = run.sft_key
        assert key is not None
        folder = self._sft_dir(key)
        summary = records.sft_summary(folder)
        if summary is not None:
            self.sft_before[key] = summary
            return
        shutil.rmtree(folder, ignore_errors=True)  # an unfinished one starts over

        def finish(seconds: float) -> None:
            atomic_write_text(folder / records.SFT_WALL_TIME, f"{seconds:.1f}\n")
            found = records.sft_summary(folder)
            if found is None:
                raise RuntimeError(f"{folder}: turnrl sft exited 0 but left no evaluated model")
            self.sft_before[key] = found

        self.tasks.append(_Task(
            key, f"SFT start {key} (seed {run.seed})",
            _turnrl("sft", *self._config_args(), *self._threads(run), *run.overrides,
                    f"run.name={folder.name}", f"run.out_dir={folder.parent}"),
            finish=finish, is_sft=True))

    def _add_run(self, run: PlannedRun) -> None:
        run_dir = self.out / "runs" / run.name

        def finish(seconds: float | None) -> None:
            before, sft_s = self.sft_before.get(run.sft_key or "", (None, None))
            record = records.run_record(run_dir, cell=run.cell.name, seed=run.seed,
                                overrides=list(run.overrides), config_key=run.config_key,
                                before=before,
                                sft_wall_time_s=sft_s, process_s=seconds, git=self.git)
            records.write_record(self.results, run.name, record)
            self.records[run.name] = record

        if (run_dir / "eval.json").is_file() and (run.sft_key is None
                                                  or run.sft_key in self.sft_before):
            finish(None)  # finished, but its record was lost: write it again
            return
        if _fresh(run_dir):
            command = _turnrl("train", *self._config_args(), *self._threads(run), *run.overrides,
                              f"run.name={run.name}", f"run.out_dir={run_dir.parent}")
            if run.sft_key is not None:
                command += [f"model.path={self._sft_dir(run.sft_key) / 'sft_model'}",
                            "sft.enabled=false", "eval.before_training=false"]
        else:
            command = _turnrl("train", "--resume", str(run_dir))
        self.tasks.append(_Task(run.name, f"{run.cell.name} seed {run.seed}", command,
                                needs=run.sft_key, finish=finish))

    # ------------------------------------------------------------------ scheduling
    def _start(self, task: _Task) -> None:
        task.log = self.out / "logs" / f"{task.name}.log"
        task.log.parent.mkdir(parents=True, exist_ok=True)
        task.started = time.monotonic()
        with task.log.open("wb") as log:
            task.process = subprocess.Popen(task.command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        print(f"[sweep] start {task.label}  (log: {task.log})", flush=True)

    def _stop(self, running: list[_Task]) -> None:
        for task in running:
            assert task.process is not None
            if task.process.poll() is None:
                os.killpg(task.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        for task in running:
            assert task.process is not None
            try:
                task.process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(task.process.pid, signal.SIGKILL)
                task.process.wait()

    def run(self) -> SweepOutcome:
        pending, running = list(self.tasks), list[_Task]()
        finished: set[str] = set(self.sft_before)
        outcome = SweepOutcome(done=len(self.records), ran=[], failed={})
        total = outcome.done + sum(not task.is_sft for task in self.tasks)

        def terminate(signum: int, frame: object) -> None:
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, terminate)
        try:
            while pending or running:
                for task in list(pending):
                    if len(running) >= self.jobs:
                        break
                    if task.needs is not None and task.needs in outcome.failed:
                        pending.remove(task)
                        outcome.failed[task.name] = f"its SFT start {task.needs} failed"
                    elif task.needs is None or task.needs in finished:
                        pending.remove(task)
                        self._start(task)
                        running.append(task)
                time.sleep(0.2)
                for task in [t for t in running if t.process and t.process.poll() is not None]:
                    running.remove(task)
                    assert task.process is not None
                    if task.process.returncode == 0:
                        try:
                            task.finish(time.monotonic() - task.started)
                        except (OSError, ValueError, RuntimeError) as error:
                            outcome.failed[task.name] = str(error)
                            print(f"[sweep] FAILED {task.label}: {error}", flush=True)
                            continue
                        finished.add(task.name)
                        if not task.is_sft:
                            outcome.ran.append(task.name)
                            outcome.done += 1
                        print(f"[sweep] done  {task.label}  ({outcome.done}/{total} runs)",
                              flush=True)
                    else:
                        why = f"exit {task.process.returncode}: {_tail(task.log)}"
                        outcome.failed[task.name] = why
                        print(f"[sweep] FAILED {task.label}: {why} (log: {task.log})",
                              flush=True)
        except KeyboardInterrupt:
            print(f"[sweep] stopping {len(running)} running process(es); the next call "
                  "resumes", flush=True)
            self._stop(running)
            outcome.interrupted = True
        finally:
            signal.signal(signal.SIGTERM, previous)
        return outcome


def run_sweep(recipe: Recipe, runs: list[PlannedRun], *, out: Path, results: Path, jobs: int,
              git: str | None, threads: int | None = None) -> SweepOutcome:
    """Run every planned run that has no record yet (see the module docstring)."""
    return _Sweep(recipe, runs, out=out, results=results, jobs=jobs, threads=threads,
                  git=git).run()
