"""Admitting rows in the decoding pass vs a prefill pass of their own: env episodes/s.

``HFEngine`` admits the requests that arrive while others decode. By default (a Llama-family
model, scores within ``hf.FUSED_ATTENTION_LIMIT``) it prefills them in the running batch's
decoding pass (``hf_decode.DecodeStep`` with an ``Extension``: one pass a step); with the
limit at 0 it runs the transformers forward as a prefill pass of their own, then the
decoding pass (what the engine did before). Both play the same built-in envs with the
shipped base model (``tiny``), the same tasks and sampling, in turn (the order flips every
round, so drifts of the machine hit both), ``--repeats`` rounds; medians are reported, with
each way's prefills, decoding steps and model passes per round.

    python bench/admission.py                                  # 3 envs, 16 x 4 episodes, 5 rounds
    python bench/admission.py --envs guess-v0 --repeats 3      # quicker

Writes ``bench/results/admission.json`` and ``admission.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import statistics
import sys
import time

from common import RESULTS, write_results

WAYS = ("fused", "separate")


def measure(args: argparse.Namespace) -> dict:
    import torch

    import turnrl.rollout.hf as hf
    from turnrl import envs
    from turnrl.models.base import shipped_base_dir
    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.runner import Runner

    torch.set_num_threads(args.threads)
    path = shipped_base_dir()
    tokenizer = load_tokenizer(path)
    model = load_policy(path, dtype=torch.float32, device=torch.device("cpu")).eval()
    limit = hf.FUSED_ATTENTION_LIMIT
    params = SamplingParams(max_new_tokens=args.reply_tokens, temperature=1.0, top_p=1.0)
    seeds = list(range(args.seed_start, args.seed_start + args.groups))
    rows = []
    for env_id in args.envs:
        make_env = functools.partial(envs.make, env_id)
        samples: dict[str, list[dict]] = {way: [] for way in WAYS}
        for round_ in range(args.repeats + 1):  # round 0 warms up
            for way in (WAYS if round_ % 2 == 0 else WAYS[::-1]):
                hf.FUSED_ATTENTION_LIMIT = limit if way == "fused" else 0
                engine = hf.HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                                     pad_token_id=tokenizer.pad_token_id, seed=round_)
                runner = Runner(engine, tokenizer, params, max_context_tokens=4096)
                start = time.perf_counter()
                episodes = runner.collect(make_env, seeds, args.group_size)
                wall = time.perf_counter() - start
                if round_ == 0:
                    continue
                stats = engine.stats
                samples[way].append({
                    "episodes_per_s": len(episodes) / wall, "wall_s": wall,
                    "turns": sum(e.num_turns for e in episodes) / len(episodes),
                    "prefills": stats["prefills"], "decode_steps": stats["decode_steps"],
                    "passes": stats["prefills"] + stats["decode_steps"] if way == "separate"
                    else None})
        hf.FUSED_ATTENTION_LIMIT = limit
        row = {"env": env_id, **{way: {key: statistics.median(s[key] for s in runs)
                                       for key in runs[0] if runs[0][key] is not None}
                                 for way, runs in samples.items()}, "rounds": samples}
        row["speedup"] = row["fused"]["episodes_per_s"] / row["separate"]["episodes_per_s"]
        print(json.dumps({k: v for k, v in row.items() if k != "rounds"}), flush=True)
        rows.append(row)
    return {"machine": platform.processor() or platform.machine(), "threads": args.threads,
            "torch": torch.__version__, "model": "tiny (the shipped base)",
            "groups": args.groups, "group_size": args.group_size,
            "reply_tokens": args.reply_tokens, "repeats": args.repeats, "rows": rows}


def markdown(result: dict) -> str:
    lines = [f"Built-in envs played by the env runner with the shipped base model, "
             f"{result['groups']} tasks x {result['group_size']} episodes a round, replies up "
             f"to {result['reply_tokens']} tokens, temperature 1; torch {result['torch']}, "
             f"{result['threads']} threads; medians of {result['repeats']} rounds", "",
             "| env | turns / episode | episodes/s, fused | episodes/s, separate | fused / "
             "separate | prefills | decoding steps (fused) | passes (separate) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        a, b = r["fused"], r["separate"]
        lines.append(f"| {r['env']} | {a['turns']:.2f} | {a['episodes_per_s']:.1f} | "
                     f"{b['episodes_per_s']:.1f} | {r['speedup']:.2f}x | {a['prefills']:.0f} | "
                     f"{a['decode_steps']:.0f} | {b['passes']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="*",
                        default=["guess-v0", "frozenlake-v0", "search-qa-v0"])
    parser.add_argument("--groups", type=int, default=16, help="tasks per round")
    parser.add_argument("--group-size", type=int, default=4, help="episodes per task")
    parser.add_argument("--repeats", type=int, default=5, help="rounds (medians reported)")
    parser.add_argument("--reply-tokens", type=int, default=32)
    parser.add_argument("--seed-start", type=int, default=1_000_000, help="first task seed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    result = measure(args)
    write_results(args.results_dir, "admission", result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
