"""TRL's GRPOTrainer vs turnrl's ``grpo`` preset: wall time per step, reward after equal samples.

Both start from the same SFT'd tiny model (turnrl's SFT on ``arithmetic-v0`` oracle answers,
run once) and train on the same single-turn task with the same settings: group size,
prompts per step, completion length, learning rate (constant), one optimizer step per batch,
one epoch, clip 0.2, no KL, group-normalised advantages (TRL ``scale_rewards="group"``,
``loss_type="grpo"``: the same per-sequence token mean as turnrl's ``seq_mean_token_mean``),
fp32 on the CPU (``use_cpu=True``, no vLLM), the whole batch in one forward pass (TRL's
``per_device_train_batch_size``, turnrl's ``micro_batch_size``). The reward is the env's own
check in both. The two alternate, run by run, ``--rounds`` times; per framework the table
gives the median wall time of a step (steps after ``--warmup`` steps, over all rounds) and the
success on held-out tasks after training (turnrl's evaluator for both models), mean over
rounds.

    pip install 'turnrl[bench]'            # TRL
    python bench/vs_trl.py                 # 2 rounds x 12 steps each
    python bench/vs_trl.py --steps 3 --rounds 1 --n-groups 2 --eval-episodes 16  # a quick check

Writes ``bench/results/vs_trl.json`` and ``vs_trl.md`` (the table of ``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, ROOT, write_results

# single-digit operands: after SFT (10 epochs on 2000 demonstrations, half of their answers
# random) the tiny model solves ~15% when sampling, so most groups have a reward spread and RL
# has room to climb (two-digit operands leave it near 5%: almost every group all-zero)
ENV_KWARGS = {"min_value": 0, "max_value": 9}
ENV = ["env.id=arithmetic-v0", "env.kwargs={min_value: 0, max_value: 9}"]
SFT = ["sft.epochs=10", "sft.lr=3e-3"]


def base_overrides(args: argparse.Namespace, out: Path) -> list[str]:
    return [*ENV, f"rollout.max_new_tokens={args.max_new_tokens}", f"run.out_dir={out}",
            f"run.threads={args.threads}", "log.progress=false", "log.tensorboard=false",
            "train.save_samples=0", "train.checkpoint_every=0",
            f"train.n_groups={args.n_groups}", f"train.group_size={args.group_size}",
            f"train.mini_batch_size={args.n_groups * args.group_size}",
            f"train.micro_batch_size={args.n_groups * args.group_size}",  # TRL: one pass
            f"train.lr={args.lr}", f"eval.episodes={args.eval_episodes}"]


def sft_start(args: argparse.Namespace, out: Path) -> Path:
    """turnrl's SFT warm start on arithmetic, saved as a model dir both frameworks load
    (``run_sft`` also evaluates it once; that evaluation is not used here)."""
    from turnrl.config import load_config
    from turnrl.train.setup import run_sft

    _, path, _ = run_sft(load_config(ROOT / "configs" / "default.yaml", [
        *base_overrides(args, out), *SFT, "run.name=sft", "train.steps=0"]),
        out=out / "sft_model")
    return path


def held_out_success(model_dir: Path, args: argparse.Namespace) -> float:
    """Success of ``model_dir`` on held-out tasks, with turnrl's evaluator (same for both)."""
    import functools

    import torch

    from turnrl import envs
    from turnrl.config import EnvConfig
    from turnrl.eval.evaluate import evaluate
    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.hf import HFEngine
    from turnrl.rollout.runner import Runner

    tokenizer = load_tokenizer(model_dir)
    model = load_policy(model_dir, dtype=torch.float32, device=torch.device("cpu"))
    engine = HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=0)
    runner = Runner(engine, tokenizer, SamplingParams(max_new_tokens=args.max_new_tokens))
    start = EnvConfig().eval_seed_start
    summary, _ = evaluate(runner, functools.partial(envs.make, "arithmetic-v0", **ENV_KWARGS),
                          range(start, start + args.eval_episodes))
    return summary["success"]


def run_turnrl(args: argparse.Namespace, sft: Path, out: Path, name: str) -> dict:
    import json

    from turnrl.config import load_config
    from turnrl.train.loop import train

    result = train(load_config(ROOT / "configs" / "default.yaml", [
        *base_overrides(args, out), f"run.name={name}", f"model.path={sft}",
        "sft.enabled=false", "eval.before_training=false", f"train.steps={args.steps}"]))
    records = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text()
               .splitlines()]
    steps = [r for r in records if r["phase"] == "train"]
    assert result.after is not None
    return {"step_s": [r["perf/step_s"] for r in steps],
            "train_reward": [r["reward/mean"] for r in steps],
            "success": result.after["success"]}


def run_trl(args: argparse.Namespace, sft: Path, out: Path, name: str) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from turnrl import envs
    from turnrl.models.policy import load_tokenizer

    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(sft)
    tasks = args.steps * args.n_groups
    rows = []
    for seed in range(tasks):  # the same training tasks turnrl draws (seeds 0, 1, ...)
        messages, _ = envs.make("arithmetic-v0", **ENV_KWARGS).reset(seed=seed)
        rows.append({"prompt": messages, "seed": seed})

    def env_reward(completions, seed, **_kwargs) -> list[float]:
        rewards = []
        for completion, task in zip(completions, seed, strict=True):
            env = envs.make("arithmetic-v0", **ENV_KWARGS)
            env.reset(seed=task)
            rewards.append(float(env.step(completion[0]["content"]).reward))
        return rewards

    step_s: list[float] = []
    train_reward: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, *_args, **_kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, *_args, **_kwargs):
            step_s.append(time.perf_counter() - self.start)

        def on_log(self, _args, _state, _control, logs=None, **_kwargs):
            if logs and "reward" in logs:
                train_reward.append(float(logs["reward"]))

    config = GRPOConfig(
        output_dir=str(out / name), use_cpu=True, bf16=False, seed=0, report_to=[],
        save_strategy="no", logging_steps=1, max_steps=args.steps,
        per_device_train_batch_size=args.n_groups * args.group_size,
        gradient_accumulation_steps=1, num_generations=args.group_size,
        max_completion_length=args.max_new_tokens, temperature=1.0, top_p=1.0,
        learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
        max_grad_norm=1.0, beta=0.0, epsilon=0.2, loss_type="grpo", scale_rewards="group",
        num_iterations=1, use_vllm=False, dataloader_num_workers=0)
    model = AutoModelForCausalLM.from_pretrained(str(sft), dtype=torch.float32)
    trainer = GRPOTrainer(model=model, reward_funcs=env_reward, args=config,
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer,
                          callbacks=[Timer()])
    trainer.train()
    final = out / name / "final"
    trainer.model.save_pretrained(str(final))
    tokenizer.save_pretrained(str(final))
    return {"step_s": step_s, "train_reward": train_reward,
            "success": held_out_success(final, args)}


def summarise(runs: dict[str, list[dict]], warmup: int) -> dict:
    out = {}
    for name, results in runs.items():
        times = [t for r in results for t in r["step_s"][warmup:]]
        out[name] = {"median_step_s": statistics.median(times), "steps_timed": len(times),
                     "success": statistics.fmean(r["success"] for r in results),
                     "success_per_round": [r["success"] for r in results]}
    out["speedup"] = out["trl"]["median_step_s"] / out["turnrl"]["median_step_s"]
    return out


def markdown(result: dict) -> str:
    s = result["summary"]
    lines = ["| framework | median s/step | held-out success after training |",
             "|---|---|---|"]
    for name in ("turnrl", "trl"):
        rounds = ", ".join(f"{x:.3f}" for x in s[name]["success_per_round"])
        lines.append(f"| {name} | {s[name]['median_step_s']:.2f} | "
                     f"{s[name]['success']:.3f} ({rounds}) |")
    lines.append(f"\nturnrl is {s['speedup']:.2f}x faster per step (TRL {result['trl_version']}, "
                 f"{result['settings']})")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--n-groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=6)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    import trl

    out = Path(tempfile.mkdtemp(prefix="turnrl-vs-trl-"))
    sft = sft_start(args, out)
    runs: dict[str, list[dict]] = {"turnrl": [], "trl": []}
    for round_ in range(args.rounds):  # alternate, switching who goes first
        order = ("trl", "turnrl") if round_ % 2 == 0 else ("turnrl", "trl")
        for name in order:
            run = run_trl if name == "trl" else run_turnrl
            runs[name].append(run(args, sft, out, f"{name}-{round_}"))
            print(name, round_, runs[name][-1]["success"],
                  statistics.median(runs[name][-1]["step_s"]), flush=True)
    settings = (f"{args.n_groups} prompts x {args.group_size} completions of <= "
                f"{args.max_new_tokens} tokens per step, {args.steps} steps, lr {args.lr}, "
                f"{args.threads} threads")
    result = {"trl_version": trl.__version__, "settings": settings, "runs": runs,
              "summary": summarise(runs, args.warmup)}
    write_results(args.results_dir, "vs_trl", result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
