"""Sandbox calls per second and python-v0 episodes per second: a base commit beside this tree.

    python bench/sandbox.py [--base 8117143] [--calls 40] [--episodes 20] [--rounds 3]

The base commit's ``src/`` is extracted with ``git archive`` into a temporary directory (the
repository's worktrees are not touched); each round runs the base and then this tree, each in a
fresh interpreter whose ``PYTHONPATH`` points at its ``src``, so both meet the same load.
A sandbox call is ``Sandbox().run("print(6 * 7)")`` (default limits, ``isolation="auto"``);
an episode is ``python-v0`` played by its oracle (reset, the ``python`` call in the sandbox,
the answer). The medians over rounds are reported, with every round's numbers in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, ROOT, write_results

MEASURE = r"""
import json, sys, time
from turnrl.sandbox import Sandbox
from turnrl.envs import make
calls, episodes = int(sys.argv[1]), int(sys.argv[2])
sandbox = Sandbox()
sandbox.run("print(6 * 7)")  # the namespace probe and the uid probe, outside the timing
start = time.perf_counter()
for _ in range(calls):
    assert sandbox.run("print(6 * 7)").stdout == "42\n"
call_s = time.perf_counter() - start
env = make("python-v0", tool_format="compact")
env.reset(seed=0)
start, solved = time.perf_counter(), 0
for seed in range(episodes):
    env.reset(seed=seed)
    done = False
    while not done:
        result = env.step(env.oracle_action())
        done = result.terminated or result.truncated
    solved += result.reward > 0
episode_s = time.perf_counter() - start
print(json.dumps({"calls_per_s": calls / call_s, "episodes_per_s": episodes / episode_s,
                  "solved": solved, "isolation": sandbox.isolation}))
"""


def measure(src: Path, calls: int, episodes: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", MEASURE, str(calls), str(episodes)],
                          env=env, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"error: the measurement under {src} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="8117143", help="the commit to compare against")
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="turnrl-bench-base-") as base_dir:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "src"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", base_dir], input=archive, check=True)
        variants = {"base": Path(base_dir) / "src", "this tree": ROOT / "src"}
        rounds: dict[str, list[dict]] = {name: [] for name in variants}
        for _ in range(args.rounds):
            for name, src in variants.items():
                rounds[name].append(measure(src, args.calls, args.episodes))
    summary = {name: {key: statistics.median(r[key] for r in runs)
                      for key in ("calls_per_s", "episodes_per_s")}
               for name, runs in rounds.items()}
    change = {key: summary["this tree"][key] / summary["base"][key] - 1
              for key in ("calls_per_s", "episodes_per_s")}
    result = {"base": args.base, "calls": args.calls, "episodes": args.episodes,
              "rounds": rounds, "median": summary, "change": change}
    table = (
        f"Sandbox calls and python-v0 episodes per second: base `{args.base}` beside this tree "
        f"(median of {args.rounds} interleaved rounds; {args.calls} calls, {args.episodes} "
        "oracle episodes each)\n\n"
        "| variant | isolation | sandbox calls/s | python-v0 episodes/s |\n|---|---|---|---|\n"
        + "".join(f"| {name} | {rounds[name][0]['isolation']} | "
                  f"{summary[name]['calls_per_s']:.2f} | {summary[name]['episodes_per_s']:.2f} |\n"
                  for name in variants)
        + f"| change | | {100 * change['calls_per_s']:+.1f}% | "
          f"{100 * change['episodes_per_s']:+.1f}% |\n"
    )
    write_results(args.out, "sandbox", result, table)


if __name__ == "__main__":
    main()
