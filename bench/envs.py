"""Every built-in env with the tiny model: random, oracle, SFT and SFT+RL success.

Per env: the random policy (``env.sample_action``) and the oracle play ``--baseline-episodes``
held-out seeds (success with a 95% Wilson interval, env wall time per episode); then, for
each training seed, ``turnrl train`` (SFT warm start on oracle demonstrations, then GRPO on
``BUDGET``: 15 steps of 8 tasks x 8 episodes with two optimizer steps each, i.e. half the
default job's optimizer steps on a quarter of its episodes) and its evaluation before and
after RL. SFT and SFT+RL success are the
mean over training seeds with a 95% t-interval. Results are written per run (an interrupted
sweep resumes), summarised in ``bench/results/envs.json`` and ``envs.md``, and the table is
put into ``docs/environments.md`` between the ``bench:envs`` markers.

    python bench/envs.py                                  # every env, 3 seeds (hours on CPU)
    python bench/envs.py --envs guess-v0 --seeds 0        # a slice of it
    python bench/envs.py --summary-only                   # re-write the tables
    python bench/envs.py --throughput                     # the sandboxed envs' speed

``--throughput`` times the envs that run code (``THROUGHPUT``: python-v0 beside swe-v0's
tiers), each played by its oracle in this process for ``--episodes`` seeds: episodes per
second, sandbox calls per episode and per second (every ``Sandbox.run``, grading included),
and the oracle's success. It writes ``env_throughput.json``/``.md`` and the table between the
``bench:env-throughput`` markers of docs/environments.md.

Every run is configs/default.yaml plus ``BUDGET`` and the env's overrides (``ENVS``, applied
after ``BUDGET``): its id, kwargs (task size), the reply length it needs and, where the default
SFT leaves the tiny model at chance, a longer SFT: arithmetic and guess on less noisy
demonstrations (the default two epochs with half the demonstrated actions random leave both at
chance, e.g. guess at 7% = 1/16 even after six epochs); Sokoban on 8 epochs of noise-injected
demonstrations whose random moves are context only (``sft.train_random_actions=false``: the
model learns the oracle's moves from the states the noise leads to; with the random moves
learned too it stays under 2%). TextWorld gets fewer demonstrations (a cost limit: every
TextWorld demonstration compiles a game). Sokoban and guess get their own RL settings: 60
steps at lr 1e-4. Many of their groups have no reward spread, and at the common lr 5e-4
AdamW's steps on the remaining few, noisy gradients threw the policy off (Sokoban seed 0:
0.090 -> 0.039 in 45 steps after climbing, and 0.000 with ``max_grad_norm=0.2``: Adam's step
does not shrink with the gradient; guess seed 3: 0.242 -> 0.074 in 15 steps). At lr 1e-4
they learn slower but keep it (docs/environments.md has the numbers).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# env id -> overrides: the env, its kwargs and the tokens one reply needs (tiny model: compact
# tool calls; everything else is the default job's config)
ENVS: dict[str, list[str]] = {
    "arithmetic-v0": ["env.id=arithmetic-v0", "env.kwargs={min_value: 0, max_value: 4}",
                      "rollout.max_new_tokens=6", "sft.epochs=10", "sft.lr=3e-3"],
    "frozenlake-v0": ["env.id=frozenlake-v0", "env.kwargs={hole_prob: 0.1}"],
    "sokoban-v0": ["env.id=sokoban-v0",
                   "env.kwargs={min_size: 3, max_size: 3, max_pulls: 2, max_turns: 8}",
                   "rollout.max_new_tokens=8", "sft.episodes=1000", "sft.epochs=8",
                   "sft.lr=3e-3", "sft.train_random_actions=false", "train.steps=60",
                   "train.lr=1e-4"],
    "guess-v0": ["env.id=guess-v0", "env.kwargs={}", "rollout.max_new_tokens=10",
                 "sft.random_action_prob=0.2", "sft.epochs=10", "sft.lr=3e-3",
                 "train.steps=60", "train.lr=1e-4"],
    "python-v0": ["env.id=python-v0", "env.kwargs={tool_format: compact}",
                  "rollout.max_new_tokens=48"],
    "search-qa-v0": ["env.id=search-qa-v0", "env.kwargs={tool_format: compact}",
                     "rollout.max_new_tokens=40"],
    "dataset-v0": ["env.id=dataset-v0", "env.kwargs={}", "rollout.max_new_tokens=16"],
    "textworld-v0": ["env.id=textworld-v0", "env.kwargs={max_turns: 8}",
                     "rollout.max_new_tokens=24", "sft.episodes=200"],
    "gym:FrozenLake-v1": ["env.id=gym:FrozenLake-v1",
                          "env.kwargs={is_slippery: false, max_turns: 12}",
                          "rollout.max_new_tokens=6"],
}
# the RL budget of every run: 15 steps of 8 x 8 episodes, two optimizer steps each (the
# default job: 30 steps of 16 x 8)
BUDGET = ["train.steps=15", "train.n_groups=8", "train.mini_batch_size=32"]
MARKERS = ("<!-- bench:envs:start -->", "<!-- bench:envs:end -->")
THROUGHPUT_MARKERS = ("<!-- bench:env-throughput:start -->", "<!-- bench:env-throughput:end -->")
# name -> (env id, kwargs): the envs whose steps run code in the sandbox
THROUGHPUT: dict[str, tuple[str, dict]] = {
    "python-v0": ("python-v0", {"tool_format": "compact"}),
    "swe-v0 (tiny)": ("swe-v0", {"tier": "tiny", "tool_format": "compact"}),
    "swe-v0 (small)": ("swe-v0", {"tier": "small", "tool_format": "compact"}),
    "swe-v0 (medium)": ("swe-v0", {"tier": "medium", "tool_format": "compact"}),
}
DEFAULT_RESULTS = ROOT / "bench" / "results"


def env_kwargs(overrides: list[str]) -> tuple[str, dict]:
    from turnrl.config import load_config

    cfg = load_config(ROOT / "configs" / "default.yaml", overrides)
    return cfg.env.id, dict(cfg.env.kwargs)


def baselines(name: str, episodes: int, first_seed: int) -> dict:
    """Random and oracle success over held-out seeds, and env wall time per episode."""
    from turnrl import envs
    from turnrl.envs.play import play
    from turnrl.eval.metrics import wilson_interval

    env_id, kwargs = env_kwargs(ENVS[name])
    out: dict = {}
    for policy in ("random", "oracle"):
        rng = random.Random(0)
        wins, start = 0, time.perf_counter()
        for seed in range(first_seed, first_seed + episodes):
            env = envs.make(env_id, **kwargs)
            if policy == "oracle" and not env.spec.has_oracle:
                out[policy] = None
                break
            read = (lambda _prompt, env=env, rng=rng: env.sample_action(rng))  # noqa: E731
            result = play(env, seed=seed, oracle=policy == "oracle", read=read,
                          show=lambda _text: None)
            wins += result.success
        else:
            low, high = wilson_interval(wins, episodes)
            out[policy] = {"success": wins / episodes, "ci": [low, high],
                           "wall_s_per_episode": (time.perf_counter() - start) / episodes}
    return out


def file_stem(name: str) -> str:
    """The env id as a file and run name (``gym:FrozenLake-v1`` -> ``gym_FrozenLake-v1``)."""
    return name.replace(":", "_").replace("/", "_")


def train_run(name: str, seed: int, work: Path, common: list[str]) -> dict:
    """SFT + RL for one training seed; success after SFT and after RL, and wall times."""
    from turnrl.config import load_config
    from turnrl.train.loop import train

    # the env's own overrides come after the common budget (Sokoban's and guess's RL steps and
    # lr), the command line's after both
    cfg = load_config(ROOT / "configs" / "default.yaml", [
        *BUDGET, *ENVS[name], *common, f"run.seed={seed}", f"run.out_dir={work}",
        f"run.name={file_stem(name)}-{seed}"])
    result = train(cfg)
    assert result.before is not None and result.after is not None
    return {"env": name, "seed": seed, "sft_success": result.before["success"],
            "rl_success": result.after["success"], "wall_time_s": result.wall_time_s,
            "rl_steps": cfg.train.steps, "rl_lr": cfg.train.lr}


def sweep(args: argparse.Namespace, results: Path) -> None:
    runs = results / "envs"
    runs.mkdir(parents=True, exist_ok=True)
    common = ["log.progress=false", "log.tensorboard=false", "train.save_samples=0",
              "train.checkpoint_every=0", f"eval.episodes={args.eval_episodes}", *args.overrides]
    for name in args.envs:
        stem = file_stem(name)
        path = runs / f"{stem}-baselines.json"
        if not path.is_file():
            record = {"env": name, **baselines(name, args.baseline_episodes, 1_000_000)}
            path.write_text(json.dumps(record, indent=2) + "\n")
            print(json.dumps(record), flush=True)
        for seed in args.seeds:
            path = runs / f"{stem}-{seed}.json"
            if not path.is_file():
                record = train_run(name, seed, Path(args.work_dir), common)
                path.write_text(json.dumps(record, indent=2) + "\n")
                print(json.dumps(record), flush=True)


def summarise(results: Path) -> str:
    from turnrl.eval.metrics import t_interval

    runs = results / "envs"
    table = []
    for name in ENVS:
        stem = file_stem(name)
        base_path = runs / f"{stem}-baselines.json"
        seeds = [json.loads(p.read_text()) for p in sorted(runs.glob(f"{stem}-[0-9]*.json"))]
        if not base_path.is_file() and not seeds:
            continue
        base = json.loads(base_path.read_text()) if base_path.is_file() else {}
        row = {"env": name, "random": base.get("random"), "oracle": base.get("oracle"),
               "seeds": len(seeds)}
        if seeds:
            row["sft"] = t_interval([r["sft_success"] for r in seeds])
            row["rl"] = t_interval([r["rl_success"] for r in seeds])
            row["rl_minus_sft"] = t_interval([r["rl_success"] - r["sft_success"]
                                              for r in seeds])
            row["train_wall_s"] = sum(r["wall_time_s"] for r in seeds) / len(seeds)
            row["rl_budget"] = ", ".join(sorted({f"{r['rl_steps']} @ {r['rl_lr']:g}"
                                                 for r in seeds}))
        table.append(row)
    (results / "envs.json").write_text(json.dumps(table, indent=2) + "\n")

    def cell(interval: list | tuple | None) -> str:
        if interval is None:
            return "—"
        mean, half = interval
        return f"{mean:.3f}" + ("" if math.isnan(half) else f" ± {half:.3f}")

    def base_cell(entry: dict | None) -> str:
        if entry is None:
            return "—"
        low, high = entry["ci"]
        return f"{entry['success']:.3f} [{low:.2f}, {high:.2f}]"

    lines = ["| env | random | oracle | SFT | SFT+RL | RL − SFT | seeds | RL steps @ lr "
             "| env s/episode (oracle) | train+eval s/seed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in table:
        wall = (row["oracle"] or row["random"] or {}).get("wall_s_per_episode")
        lines.append(
            f"| `{row['env']}` | {base_cell(row['random'])} | {base_cell(row['oracle'])} | "
            f"{cell(row.get('sft'))} | {cell(row.get('rl'))} | {cell(row.get('rl_minus_sft'))}"
            f" | {row['seeds']} | {row['rl_budget']} | {'—' if wall is None else f'{wall:.4f}'}"
            f" | {row['train_wall_s']:.0f} |" if "train_wall_s" in row else
            f"| `{row['env']}` | {base_cell(row['random'])} | {base_cell(row['oracle'])} | — | "
            f"— | — | 0 | — | {'—' if wall is None else f'{wall:.4f}'} | — |")
    markdown = "\n".join(lines) + "\n"
    (results / "envs.md").write_text(markdown)
    return markdown


def throughput(name: str, episodes: int) -> dict:
    """``name``'s oracle over seeds ``0..episodes-1``: wall time, episodes and sandbox calls
    per second (every :meth:`Sandbox.run` in this process is counted, grading included)."""
    from turnrl import envs
    from turnrl.sandbox import Sandbox

    env_id, kwargs = THROUGHPUT[name]
    calls = 0
    original = Sandbox.run

    def counted(self: Sandbox, *args: object, **kw: object) -> object:
        nonlocal calls
        calls += 1
        return original(self, *args, **kw)  # type: ignore[arg-type]

    env = envs.make(env_id, **kwargs)
    env.reset(seed=episodes)  # the sandbox's probes and imports, outside the timing
    Sandbox.run = counted  # type: ignore[assignment]
    try:
        start, solved, steps = time.perf_counter(), 0, 0
        for seed in range(episodes):
            env.reset(seed=seed)
            done = False
            while not done:
                result = env.step(env.oracle_action())
                steps += 1
                done = result.terminated or result.truncated
            solved += result.reward > 0
        wall = time.perf_counter() - start
    finally:
        Sandbox.run = original  # type: ignore[method-assign]
        env.close()
    return {"env": name, "env_id": env_id, "kwargs": kwargs, "episodes": episodes,
            "wall_s": wall, "episodes_per_s": episodes / wall, "steps_per_episode":
            steps / episodes, "sandbox_calls_per_episode": calls / episodes,
            "sandbox_calls_per_s": calls / wall, "oracle_success": solved / episodes}


def throughput_table(rows: list[dict]) -> str:
    lines = ["| env | episodes/s | steps/episode | sandbox calls/episode | sandbox calls/s "
             "| oracle success |", "|---|---|---|---|---|---|"]
    lines += [f"| `{r['env']}` | {r['episodes_per_s']:.2f} | {r['steps_per_episode']:.1f} | "
              f"{r['sandbox_calls_per_episode']:.1f} | {r['sandbox_calls_per_s']:.2f} | "
              f"{r['oracle_success']:.2f} |" for r in rows]
    return "\n".join(lines) + "\n"


def write_docs(markdown: str, markers: tuple[str, str] = MARKERS) -> None:
    """Replace the table between ``markers`` in docs/environments.md (if they exist)."""
    docs = ROOT / "docs" / "environments.md"
    text = docs.read_text()
    start, end = markers
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        docs.write_text(f"{head}{start}\n{markdown}{end}{tail}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="*", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--baseline-episodes", type=int, default=200)
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--work-dir", default="/tmp/turnrl-bench-envs")
    parser.add_argument("--results-dir", default=str(DEFAULT_RESULTS),
                        help="docs/environments.md is updated only for the default")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--throughput", action="store_true",
                        help="time the sandboxed envs' oracles instead of training")
    parser.add_argument("--episodes", type=int, default=40, help="episodes per env (--throughput)")
    parser.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    args = parser.parse_args(argv)
    results = Path(args.results_dir)
    if args.throughput:
        sys.path.insert(0, str(ROOT / "bench"))
        from common import write_results

        rows = [throughput(name, args.episodes) for name in THROUGHPUT]
        table = throughput_table(rows)
        write_results(results, "env_throughput", {"rows": rows}, table)
        if results.resolve() == DEFAULT_RESULTS.resolve():
            write_docs(table, THROUGHPUT_MARKERS)
        return
    if not args.summary_only:
        sweep(args, results)
    markdown = summarise(results)
    if results.resolve() == DEFAULT_RESULTS.resolve():  # a trial elsewhere leaves the docs be
        write_docs(markdown)
    print(markdown)


if __name__ == "__main__":
    main(sys.argv[1:])
