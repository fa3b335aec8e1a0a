"""Measure the default job: wall time, peak RSS and success before/after RL.

Runs ``turnrl train`` (configs/default.yaml plus any overrides given on the command line) in
a child process, reads its ``eval.json`` and writes ``bench/results/default_run.json`` and a
markdown table ``bench/results/default_run.md``.

    python bench/default_run.py                 # the default job, as the README runs it
    python bench/default_run.py train.steps=5   # a shorter variant
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_WALL_S = 600.0
TARGET_RSS_GIB = 4.0
TARGET_GAIN_PP = 20.0


def main(overrides: list[str]) -> dict:
    out_dir = Path(tempfile.mkdtemp(prefix="turnrl-bench-"))
    command = [sys.executable, "-m", "turnrl.cli", "train", f"run.out_dir={out_dir}",
               "log.progress=false", *overrides]
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT)
    wall = time.perf_counter() - start
    peak_rss_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB → GiB
    evaluation = json.loads(next(out_dir.glob("*/eval.json")).read_text())
    before, after = evaluation["before"], evaluation["after"]
    gain = 100 * (after["success"] - before["success"])
    result = {
        "command": " ".join(["turnrl", "train", *overrides]),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "wall_time_s": round(wall, 1),
        "peak_rss_gib": round(peak_rss_gib, 3),
        "success_before": [before["success"], before["success_lo"], before["success_hi"]],
        "success_after": [after["success"], after["success_lo"], after["success_hi"]],
        "gain_pp": round(gain, 1),
        "targets": {"wall_time_s": TARGET_WALL_S, "peak_rss_gib": TARGET_RSS_GIB,
                    "gain_pp": TARGET_GAIN_PP},
        "met": {"wall_time": wall <= TARGET_WALL_S, "rss": peak_rss_gib <= TARGET_RSS_GIB,
                "gain": gain >= TARGET_GAIN_PP},
        "run_dir": str(next(out_dir.glob("*/eval.json")).parent),
    }
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "default_run.json").write_text(json.dumps(result, indent=2) + "\n")

    def fmt(s: list[float]) -> str:
        return f"{s[0]:.3f} [{s[1]:.3f}, {s[2]:.3f}]"

    table = "\n".join([
        f"`{result['command']}` on {result['machine']}",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| wall time | {wall:.0f} s | <= {TARGET_WALL_S:.0f} s |",
        f"| peak RSS | {peak_rss_gib:.2f} GiB | <= {TARGET_RSS_GIB:.0f} GiB |",
        f"| success after SFT (95% CI) | {fmt(result['success_before'])} | |",
        f"| success after RL (95% CI) | {fmt(result['success_after'])} | |",
        f"| gain | {gain:+.1f} pp | >= +{TARGET_GAIN_PP:.0f} pp |",
        "",
    ])
    (results / "default_run.md").write_text(table)
    print(table)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
