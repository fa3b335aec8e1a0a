"""Soak test: memory over a long run of the default config, and no leftover child processes.

Trains ``configs/default.yaml`` (plus overrides) for ``--steps`` RL steps or ``--minutes``
minutes, whichever comes first (the time limit sends the run a SIGINT: it finishes its step,
checkpoints and stops), and records the process's resident set size after every step. The
slope of RSS against the step (least squares over the second half, after warm-up) is reported
with a 95% interval; a flat run has a slope whose interval contains 0, or a total drift that
is small next to the RSS. At the end it lists any child process still alive.

    python bench/soak.py                       # 1000 steps or 60 minutes
    python bench/soak.py --minutes 5 --steps 50 train.n_groups=4

Writes ``bench/results/soak.json`` and ``soak.md`` (a table of ``docs/reliability.md``).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from common import RESULTS, ROOT, write_results


def rss_mib() -> float:
    """Resident set size of this process (``/proc/self/status``, VmRSS), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def live_children() -> list[str]:
    """``pid command`` of every process whose parent is this one."""
    me, found = os.getpid(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.append(f"{proc.name} {(proc / 'cmdline').read_text()[:80]!r}")
        except (OSError, IndexError, ValueError):
            continue
    return found


def slope(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope of ys on xs and the half-width of its 95% interval (normal
    quantile: needs at least 30 points)."""
    n = len(xs)
    if n < 30:
        raise ValueError(f"soak: {n} steps in the second half; run at least 60 steps")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    residuals = [y - my - b * (x - mx) for x, y in zip(xs, ys, strict=True)]
    se = math.sqrt(sum(r * r for r in residuals) / (n - 2) / sxx)
    return b, 1.96 * se


def run(args: argparse.Namespace) -> dict:
    from turnrl.config import load_config
    from turnrl.train.hooks import StepHooks
    from turnrl.train.loop import Interrupted, train

    cfg = load_config(ROOT / "configs" / "default.yaml", [
        f"train.steps={args.steps}", "log.progress=false", "log.tensorboard=false",
        "eval.before_training=false", "eval.episodes=32", "train.save_samples=0",
        f"run.out_dir={tempfile.mkdtemp(prefix='turnrl-soak-')}", *args.overrides])
    samples: list[tuple[int, float, float]] = []
    start = time.perf_counter()
    hooks_start, end_step = StepHooks.start, StepHooks.end_step

    # the time limit counts from the first RL step: SIGINT is only a clean stop there
    timer = threading.Timer(args.minutes * 60, os.kill, (os.getpid(), signal.SIGINT))

    def starting(self: StepHooks) -> None:  # just before the first RL step
        hooks_start(self)
        if not timer.is_alive() and not samples:
            timer.start()

    def recording(self: StepHooks, metrics: dict[str, float],
                  advance: Callable[[str], None]) -> None:
        # right after the step's update, before its logs, alarms, evaluation and checkpoint
        samples.append((self.state.step + 1, time.perf_counter() - start, rss_mib()))
        end_step(self, metrics, advance)

    StepHooks.start = starting  # type: ignore[method-assign]
    StepHooks.end_step = recording  # type: ignore[method-assign]
    stopped_by = "steps"
    try:
        train(cfg)
    except Interrupted:
        stopped_by = "time limit"
    except KeyboardInterrupt:  # the limit fell in the final evaluation: RL was over
        stopped_by = "time limit (during the final evaluation)"
    finally:
        timer.cancel()
        StepHooks.start, StepHooks.end_step = hooks_start, end_step  # type: ignore[method-assign]
    half = samples[len(samples) // 2:]
    b, width = slope([s[0] for s in half], [s[2] for s in half])
    return {"steps": len(samples), "stopped_by": stopped_by, "minutes": samples[-1][1] / 60,
            "rss_first_mib": samples[0][2], "rss_last_mib": samples[-1][2],
            "rss_max_mib": max(s[2] for s in samples),
            "slope_mib_per_step": b, "slope_ci95": width,
            "drift_over_second_half_mib": b * (half[-1][0] - half[0][0]),
            "children_left": live_children(), "samples": samples}


def markdown(result: dict) -> str:
    return "\n".join([
        "| steps | minutes | RSS first / last / max (MiB) | slope, second half (MiB/step) | "
        "drift over second half | children left |",
        "|---|---|---|---|---|---|",
        f"| {result['steps']} ({result['stopped_by']}) | {result['minutes']:.1f} | "
        f"{result['rss_first_mib']:.0f} / {result['rss_last_mib']:.0f} / "
        f"{result['rss_max_mib']:.0f} | {result['slope_mib_per_step']:+.4f} ± "
        f"{result['slope_ci95']:.4f} | {result['drift_over_second_half_mib']:+.1f} MiB | "
        f"{len(result['children_left'])} |"]) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--results-dir", default=str(RESULTS))
    parser.add_argument("overrides", nargs="*", help="extra key=value overrides")
    args = parser.parse_args(argv)
    result = run(args)
    write_results(args.results_dir, "soak", result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
