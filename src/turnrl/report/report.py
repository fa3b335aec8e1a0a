"""``turnrl report RUN [RUN ...]``: one self-contained HTML page per set of runs.

The page has the learning curves (with alarms and rollbacks on the x axis), the time per
step, the held-out evaluations with their 95% intervals (and pass@k), a trajectory browser
over ``samples/`` (:mod:`turnrl.report.episodes`), and each run's resolved config and
provenance (``meta.json``). Cost is bounded for long runs: at most ``max_episodes`` sampled
episodes are embedded (spread over the run's steps), each parsed only when opened.
"""

from __future__ import annotations

import datetime
import logging
import time
from pathlib import Path
from typing import Any

import yaml

from turnrl.report import curves, episodes, figures
from turnrl.report.colours import PALETTES
from turnrl.report.page import json_for_html, render, write_page
from turnrl.report.runs import RunRecord, load_run

__all__ = ["MAX_EPISODES", "build_report", "report_data", "run_tokenizer", "write_report",
           "write_run_report"]

log = logging.getLogger(__name__)

MAX_EPISODES = 2000  # embedded episodes per run, spread over its steps


def run_tokenizer(run: RunRecord) -> Any:
    """The run's tokenizer (its tiny model's, a checkpoint's, or ``model.path``'s from local
    files), or None when none can be read: tokens are then shown as ids."""
    from transformers import AutoTokenizer

    from turnrl.train.checkpoint import latest_checkpoint

    candidates: list[str] = [str(run.path / "base_model")]
    newest = latest_checkpoint(run.path) if (run.path / "checkpoints").is_dir() else None
    if newest is not None:
        candidates.append(str(newest))
    source = run.config.get("model", {}).get("path")
    if isinstance(source, str) and source not in ("tiny", "tiny-random"):
        candidates.append(source)
    for candidate in candidates:
        if candidate.startswith(str(run.path)) and not Path(candidate).is_dir():
            continue
        try:
            return AutoTokenizer.from_pretrained(candidate, local_files_only=True)
        except (OSError, ValueError) as error:
            log.debug("no tokenizer in %s: %s", candidate, error)
    return None


def _browser(run: RunRecord, r: int, max_episodes: int, tokenizer: Any
             ) -> tuple[dict[str, Any], dict[str, str]]:
    """The trajectory browser's data for run number ``r`` and its episode documents."""
    if not run.sample_steps:
        return {"steps": [], "index": [], "groups": {}, "vocab": {}, "scales": {}}, {}
    per_step = len(episodes.read_samples(run.samples_path(run.sample_steps[-1]))) or 1
    shown = episodes.choose_steps(run.sample_steps, per_step, max_episodes)
    read = {step: episodes.read_samples(run.samples_path(step)) for step in shown}
    everything = [e for step in shown for e in read[step]]
    scales = episodes.fit_scales(everything)
    index, documents = [], {}
    for step in shown:
        for i, episode in enumerate(read[step]):
            index.append(episodes.index_row(step, i, episode))
            view = episodes.episode_view(run, step, i, episode, scales)
            documents[f"ep-{r}-{step}-{i}"] = json_for_html(view)
    vocab = episodes.vocabulary(everything, tokenizer)
    return {"steps": shown, "all_steps": len(run.sample_steps), "index": index,
            "groups": {f"{s}:{g}": members for (s, g), members in
                       episodes.groups(index).items()},
            "vocab": {str(k): v for k, v in vocab.items()},
            "scales": {mode: {"lo": s.lo, "hi": s.hi, "reverse": s.reverse}
                       for mode, s in scales.items()}}, documents


def report_data(runs: list[RunRecord], *, max_episodes: int = MAX_EPISODES,
                tokenizers: list[Any] | None = None
                ) -> tuple[dict[str, Any], dict[str, str]]:
    """The page's data (figures, tables, browser index) and its episode documents."""
    plots = figures.learning_curves(runs)
    extra = [f for f in (figures.timing_figure(runs), figures.pass_at_k_figure(runs)) if f]
    data: dict[str, Any] = {"figures": plots + extra, "palettes": PALETTES, "runs": []}
    documents: dict[str, str] = {}
    for r, run in enumerate(runs):
        tokenizer = tokenizers[r] if tokenizers is not None else run_tokenizer(run)
        browser, docs = _browser(run, r, max_episodes, tokenizer)
        documents.update(docs)
        data["runs"].append({"name": run.name, "browser": browser})
    return data, documents


def _summary(run: RunRecord) -> dict[str, Any]:
    """What the page's header and config section say about a run."""
    config = run.config
    train = [row for row in run.rows if row.get("phase") == "train"]
    return {"name": run.name, "path": str(run.path),
            "env": config.get("env", {}).get("id"), "preset": config.get("algo", {}).get(
                "preset"), "model": config.get("model", {}).get("path"),
            "steps": max((row["step"] for row in train), default=0),
            "planned": config.get("train", {}).get("steps"),
            "wall_time_s": (run.evaluation or {}).get("wall_time_s"),
            "finished": run.evaluation is not None, "sessions": run.sessions,
            "config_yaml": yaml.safe_dump(config, sort_keys=False) if config else "",
            "eval": curves.eval_table(run)}


def build_report(paths: list[Path], *, max_episodes: int = MAX_EPISODES,
                 tokenizers: list[Any] | None = None) -> str:
    """The report page of the run directories ``paths``, as HTML text."""
    runs = [load_run(path) for path in paths]
    data, documents = report_data(runs, max_episodes=max_episodes, tokenizers=tokenizers)
    title = ", ".join(run.name for run in runs)
    generated = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return render("report.html.j2", {"title": title, "generated": generated, "data": data,
                                     "runs": [_summary(run) for run in runs],
                                     "figures": data["figures"]},
                  scripts=("report.js",), documents=documents)


def write_report(paths: list[Path], out: Path | None = None, *,
                 max_episodes: int = MAX_EPISODES) -> Path:
    """Write the report of ``paths`` to ``out`` (default: ``<first run>/report.html``)."""
    start = time.perf_counter()
    html = build_report(paths, max_episodes=max_episodes)
    path = write_page(out if out is not None else Path(paths[0]) / "report.html", html)
    log.debug("report %s built in %.1f s", path, time.perf_counter() - start)
    return path


def write_run_report(run_dir: Path) -> Path | None:
    """``run_dir/report.html`` for a run in progress or just finished (``log.report``,
    ``log.report_every``); a report that cannot be built is a warning, never a failed run."""
    try:
        return write_report([run_dir])
    except Exception as error:
        log.warning("could not write %s/report.html: %s: %s", run_dir,
                    type(error).__name__, error)
        return None
