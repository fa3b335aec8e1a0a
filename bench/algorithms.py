"""Every algorithm preset on frozenlake and on a long-horizon sparse-reward variant.

For each (env, seed) the SFT warm start runs once and is shared by all presets (same budget,
same starting point); each preset then trains with the same RL budget and is evaluated on the
same held-out seeds. Results are written per run (so an interrupted sweep resumes where it
stopped) and summarised in ``bench/results/algorithms.json`` and ``algorithms.md``: final
success per preset and env, mean over seeds with a 95% t-interval.

    python bench/algorithms.py                                  # the full sweep (hours on CPU)
    python bench/algorithms.py --presets grpo rloo --seeds 0    # a slice of it
    python bench/algorithms.py --summary-only                   # re-write the table

No preset gets its own tuning: every run uses configs/default.yaml plus the overrides below.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENVS = {
    # the default job's task
    "frozenlake": ["env.id=frozenlake-v0", "env.kwargs={hole_prob: 0.1}"],
    # longer horizon, same sparse success reward: 6x6 maps, up to 16 turns
    "frozenlake_long": ["env.id=frozenlake-v0",
                        "env.kwargs={hole_prob: 0.1, min_size: 6, max_size: 6, max_turns: 16}"],
}


def run_train(overrides: list[str]) -> dict:
    """One ``turnrl train`` in this process; returns its eval.json."""
    from turnrl.config import load_config
    from turnrl.train.loop import train

    result = train(load_config(ROOT / "configs" / "default.yaml", overrides))
    return json.loads((result.run_dir / "eval.json").read_text())


def sft_model(env: str, seed: int, work: Path, common: list[str]) -> tuple[Path, dict]:
    """The shared SFT warm start of (env, seed): its model dir and its evaluation."""
    out = work / f"sft-{env}-{seed}"
    done = out / "sft.json"
    if not done.is_file():
        from turnrl.config import load_config
        from turnrl.train.setup import run_sft

        cfg = load_config(ROOT / "configs" / "default.yaml", [
            *ENVS[env], *common, f"run.seed={seed}", f"run.out_dir={work}",
            f"run.name=sft-run-{env}-{seed}", "train.steps=0"])
        # SFT, the model saved to ``out``, then its evaluation ("after SFT")
        _, _, summary = run_sft(cfg, out=out)
        done.write_text(json.dumps(summary))
    return out, json.loads(done.read_text())


def sweep(args: argparse.Namespace, results: Path) -> None:
    from turnrl.algos import PRESETS

    presets = args.presets or sorted(PRESETS)
    work = Path(args.work_dir)
    common = ["log.progress=false", "log.tensorboard=false", "train.save_samples=0",
              "train.checkpoint_every=0", f"train.steps={args.steps}",
              f"eval.episodes={args.eval_episodes}", *args.overrides]
    runs = results / "algorithms"
    runs.mkdir(parents=True, exist_ok=True)
    for env in args.envs:
        for seed in args.seeds:
            model_dir, before = sft_model(env, seed, work, common)
            for preset in presets:
                path = runs / f"{env}-{preset}-{seed}.json"
                if path.is_file():
                    continue
                evaluation = run_train([
                    *ENVS[env], *common, f"run.seed={seed}", f"run.out_dir={work}",
                    f"run.name={env}-{preset}-{seed}", f"model.path={model_dir}",
                    "sft.enabled=false", "eval.before_training=false",
                    f"algo.preset={preset}"])
                record = {"env": env, "preset": preset, "seed": seed,
                          "sft_success": before["success"],
                          "success": evaluation["after"]["success"],
                          "wall_time_s": evaluation["wall_time_s"]}
                path.write_text(json.dumps(record, indent=2) + "\n")
                print(json.dumps(record), flush=True)


def summarise(results: Path) -> None:
    from turnrl.eval.metrics import t_interval

    records = [json.loads(p.read_text()) for p in sorted((results / "algorithms").glob("*.json"))]
    table: dict[str, dict[str, dict]] = {}
    for r in records:
        table.setdefault(r["preset"], {}).setdefault(r["env"], {"success": [], "sft": []})
        table[r["preset"]][r["env"]]["success"].append(r["success"])
        table[r["preset"]][r["env"]]["sft"].append(r["sft_success"])
    summary = {preset: {env: {"seeds": len(v["success"]),
                              "success": t_interval(v["success"]),
                              "sft_success": t_interval(v["sft"])}
                        for env, v in envs.items()}
               for preset, envs in table.items()}
    (results / "algorithms.json").write_text(json.dumps(summary, indent=2) + "\n")
    envs = list(ENVS)
    lines = ["| preset | " + " | ".join(f"{e} success (SFT start)" for e in envs) + " |",
             "|---|" + "---|" * len(envs)]
    for preset in sorted(summary):
        cells = []
        for env in envs:
            cell = summary[preset].get(env)
            if cell is None:
                cells.append("—")
                continue
            (m, h), (sm, _) = cell["success"], cell["sft_success"]
            width = "" if math.isnan(h) else f" ± {h:.3f}"
            cells.append(f"{m:.3f}{width} ({sm:.3f}), n={cell['seeds']}")
        lines.append(f"| {preset} | " + " | ".join(cells) + " |")
    (results / "algorithms.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", nargs="*", help="default: every preset")
    parser.add_argument("--envs", nargs="*", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=30, help="RL steps per run")
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--work-dir", default="/tmp/turnrl-bench-algorithms")
    parser.add_argument("--results-dir", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    args = parser.parse_args(argv)
    results = Path(args.results_dir)
    if not args.summary_only:
        sweep(args, results)
    summarise(results)


if __name__ == "__main__":
    main(sys.argv[1:])
