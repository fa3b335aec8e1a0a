"""Sync vs async training when env steps are slow and long-tailed: episodes/s, reward after
equal samples.

``frozenlake-v0`` with simulated tool latency on every env step (``env.latency``: log-normal,
median ``--median`` s, shape ``--sigma``: the p99 step is ``median · e^(2.33·sigma)``), on the
Ray backend with ``--workers`` rollout workers and the learner in the driver. Both modes start
from the same SFT model (run once) and train for the same number of steps on the same batch
size, so they see the same number of samples; async lets the rollout workers keep sampling
(up to ``--max-staleness`` updates ahead, with the behaviour-policy correction) while the
learner updates. The two modes alternate run by run, ``--rounds`` times. Per mode the table
gives the episode throughput of the RL loop (episodes trained / wall time of the steps after
the first), the median step time, and the held-out success after training (mean over rounds).

    pip install 'turnrl[ray]'
    python bench/async.py                                 # 2 rounds x 12 steps
    python bench/async.py --steps 3 --rounds 1 --eval-episodes 16 --sft-episodes 200  # quick

Writes ``bench/results/async.json`` and ``async.md`` (the table of ``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from common import RESULTS, ROOT, write_results


def base_overrides(args: argparse.Namespace, out: Path) -> list[str]:
    return [f"run.out_dir={out}", f"run.threads={args.threads}", "log.progress=false",
            "log.tensorboard=false", "train.save_samples=0", "train.checkpoint_every=0",
            f"train.n_groups={args.n_groups}", f"train.group_size={args.group_size}",
            f"train.mini_batch_size={args.n_groups * args.group_size // 2}",
            f"train.micro_batch_size={min(16, args.n_groups * args.group_size // 2)}",
            f"eval.episodes={args.eval_episodes}", f"sft.episodes={args.sft_episodes}",
            f"env.latency.median_s={args.median}", f"env.latency.sigma={args.sigma}",
            "distributed.backend=ray", f"distributed.num_rollout_workers={args.workers}",
            f"distributed.worker_threads={args.threads}",
            f"distributed.num_cpus={max(2, args.workers)}"]


def sft_start(args: argparse.Namespace, out: Path) -> Path:
    """The shared SFT warm start (no latency: it is not what is measured), saved as a model
    dir (``run_sft`` also evaluates it once; that evaluation is not used here)."""
    from turnrl.config import load_config
    from turnrl.train.setup import run_sft

    _, path, _ = run_sft(load_config(ROOT / "configs" / "default.yaml", [
        *base_overrides(args, out), "env.latency.median_s=0", "distributed.backend=none",
        "distributed.num_rollout_workers=1", "run.name=sft", "train.steps=0"]),
        out=out / "sft_model")
    return path


def run_mode(args: argparse.Namespace, mode: str, sft: Path, out: Path, name: str) -> dict:
    from turnrl.config import load_config
    from turnrl.train.loop import train

    result = train(load_config(ROOT / "configs" / "default.yaml", [
        *base_overrides(args, out), f"model.path={sft}", "sft.enabled=false",
        "eval.before_training=false", f"train.steps={args.steps}", f"train.mode={mode}",
        f"train.max_staleness={args.max_staleness}", f"run.name={name}"]))
    records = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text()
               .splitlines()]
    steps = [r for r in records if r.get("phase") == "train"]
    timed = steps[1:]  # the first step fills the pipeline
    episodes = args.n_groups * args.group_size * len(timed)
    assert result.after is not None
    return {"mode": mode, "episodes_per_s": episodes / sum(r["perf/step_s"] for r in timed),
            "step_s": [r["perf/step_s"] for r in steps],
            "learner_wait_s": [r.get("perf/learner_wait_s", r["perf/rollout_s"]) for r in steps],
            "dropped_stale": sum(r.get("perf/dropped_stale", 0.0) for r in steps),
            "train_reward_last3": statistics.fmean(r["reward/mean"] for r in steps[-3:]),
            "success": result.after["success"], "wall_time_s": result.wall_time_s}


def summarise(runs: dict[str, list[dict]]) -> dict:
    out = {}
    for mode, rs in runs.items():
        out[mode] = {"episodes_per_s": statistics.fmean(r["episodes_per_s"] for r in rs),
                     "median_step_s": statistics.median(s for r in rs for s in r["step_s"][1:]),
                     "success": statistics.fmean(r["success"] for r in rs),
                     "success_runs": [r["success"] for r in rs],
                     "train_reward_last3": statistics.fmean(r["train_reward_last3"] for r in rs),
                     "dropped_stale": sum(r["dropped_stale"] for r in rs)}
    out["speedup"] = out["async"]["episodes_per_s"] / out["sync"]["episodes_per_s"]
    return out


def markdown(result: dict, args: argparse.Namespace) -> str:
    lines = ["| mode | episodes/s | median step (s) | held-out success after training "
             "(runs) | training reward, last 3 steps | stale groups dropped |",
             "|---|---|---|---|---|---|"]
    for mode in ("sync", "async"):
        m = result["summary"][mode]
        runs = ", ".join(f"{s:.3f}" for s in m["success_runs"])
        lines.append(f"| {mode} | {m['episodes_per_s']:.2f} | {m['median_step_s']:.2f} | "
                     f"{m['success']:.3f} ({runs}) | {m['train_reward_last3']:.3f} | "
                     f"{m['dropped_stale']:.0f} |")
    lines.append("")
    lines.append(f"async / sync episode throughput: **{result['summary']['speedup']:.2f}x** "
                 f"(max_staleness {args.max_staleness}; env step latency log-normal, median "
                 f"{args.median} s, sigma {args.sigma}; {args.workers} rollout worker(s), "
                 f"{args.n_groups}x{args.group_size} episodes per step, {args.steps} steps, "
                 f"{args.rounds} rounds alternating)")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n-groups", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--median", type=float, default=0.2, help="median env step latency, s")
    parser.add_argument("--sigma", type=float, default=1.0, help="log-normal shape")
    parser.add_argument("--max-staleness", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="rollout workers")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--eval-episodes", type=int, default=128)
    parser.add_argument("--sft-episodes", type=int, default=2000)
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    out = Path(tempfile.mkdtemp(prefix="turnrl-bench-async-"))
    sft = sft_start(args, out)
    runs: dict[str, list[dict]] = {"sync": [], "async": []}
    for round_ in range(args.rounds):
        for mode in ("sync", "async") if round_ % 2 == 0 else ("async", "sync"):
            runs[mode].append(run_mode(args, mode, sft, out, f"{mode}-{round_}"))
            print(json.dumps({k: v for k, v in runs[mode][-1].items() if k != "step_s"}),
                  flush=True)
    result = {"args": vars(args), "runs": runs, "summary": summarise(runs)}
    write_results(args.results_dir, "async", result, markdown(result, args))


if __name__ == "__main__":
    main(sys.argv[1:])
