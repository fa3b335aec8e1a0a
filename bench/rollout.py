"""Decode throughput: turnrl's HFEngine vs transformers' ``model.generate``, side by side.

Same tiny model (the built-in one, fp32 on CPU), same left-padded prompts, same sampling
(temperature 1, no top-p), every request forced to its full length (no EOS). For each batch
size and new-token count the engine, the same engine decoding through ``model(...)``
(``fast_decode=False``: what ``hf_decode.DecodeStep`` saves) and ``generate`` are timed in
turn ``--repeats`` times; the table reports the median tokens/s of each and their ratios.
The machine's fp32 matmul rate is measured in the same run and each engine's model FLOP/s
is given as a fraction of it (2 · parameters FLOPs per generated token, attention excluded:
a lower bound of the work done).

    python bench/rollout.py                                   # batch 1, 16, 64; 32 and 128 tokens
    python bench/rollout.py --batch-sizes 1 4 --new-tokens 8  # a quick check

Writes ``bench/results/rollout.json`` and ``rollout.md`` (the table of ``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, write_results


def matmul_flops(size: int = 1024, repeats: int = 20) -> float:
    """Measured fp32 FLOP/s of ``size x size`` matmuls (2·size³ FLOPs each), best of 3."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    best = 0.0
    for _ in range(3):
        torch.mm(a, b)
        start = time.perf_counter()
        for _ in range(repeats):
            torch.mm(a, b)
        best = max(best, 2 * size**3 * repeats / (time.perf_counter() - start))
    return best


def prompts(batch: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    """``batch`` random prompts of ``length // 2 .. length`` tokens (uneven: padding matters)."""
    import random

    rng = random.Random(seed)
    return [[rng.randrange(10, vocab) for _ in range(rng.randint(length // 2, length))]
            for _ in range(batch)]


def time_generate(model, batch: list[list[int]], new_tokens: int, pad_id: int) -> float:
    import torch

    width = max(len(p) for p in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, prompt in enumerate(batch):
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=1.0,
                             top_p=1.0, top_k=0, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, pad_token_id=pad_id)
    elapsed = time.perf_counter() - start
    assert out.shape[1] == width + new_tokens
    return elapsed


def time_engine(engine, batch: list[list[int]], new_tokens: int) -> float:
    from turnrl.rollout.engine import SamplingParams

    params = SamplingParams(max_new_tokens=new_tokens, temperature=1.0)
    start = time.perf_counter()
    completions = engine.generate_batch(batch, params)
    elapsed = time.perf_counter() - start
    assert all(len(c.token_ids) == new_tokens for c in completions)
    return elapsed


def run(args: argparse.Namespace) -> dict:
    import torch

    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.models.tiny import init_tiny_model
    from turnrl.rollout.hf import HFEngine

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    path = init_tiny_model(Path(tempfile.mkdtemp(prefix="turnrl-rollout-")) / "tiny")
    tokenizer = load_tokenizer(path)
    model = load_policy(path, dtype=torch.float32, device=torch.device("cpu")).eval()
    n_params = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    # eos -1 is never sampled: every request runs to its full length, as min_new_tokens does
    engine = HFEngine(model, eos_token_id=-1, pad_token_id=tokenizer.pad_token_id, seed=0)
    # the same engine decoding through model(...): what hf_decode.DecodeStep saves
    plain = HFEngine(model, eos_token_id=-1, pad_token_id=tokenizer.pad_token_id, seed=0,
                     fast_decode=False)
    peak = matmul_flops()
    rows = []
    for batch_size in args.batch_sizes:
        for new_tokens in args.new_tokens:
            batch = prompts(batch_size, args.prompt_tokens, len(tokenizer), seed=batch_size)
            time_engine(engine, batch, 2)  # warm-up of the three paths
            time_engine(plain, batch, 2)
            time_generate(model, batch, 2, tokenizer.pad_token_id)
            ours, forward, theirs = [], [], []
            for _ in range(args.repeats):  # alternate, so drifts of the machine hit all
                ours.append(time_engine(engine, batch, new_tokens))
                forward.append(time_engine(plain, batch, new_tokens))
                theirs.append(time_generate(model, batch, new_tokens, tokenizer.pad_token_id))
            tokens = batch_size * new_tokens
            turnrl_tps = tokens / statistics.median(ours)
            forward_tps = tokens / statistics.median(forward)
            generate_tps = tokens / statistics.median(theirs)
            rows.append({
                "batch_size": batch_size, "new_tokens": new_tokens,
                "turnrl_tokens_per_s": turnrl_tps, "generate_tokens_per_s": generate_tps,
                "ratio": turnrl_tps / generate_tps, "model_forward_tokens_per_s": forward_tps,
                "decode_step_speedup": turnrl_tps / forward_tps,
                "turnrl_flops_fraction": turnrl_tps * 2 * n_params / peak,
                "generate_flops_fraction": generate_tps * 2 * n_params / peak,
            })
            print(json.dumps(rows[-1]), flush=True)
    return {"machine": platform.processor() or platform.machine(), "threads": args.threads,
            "torch": torch.__version__, "matmul_fp32_flops": peak,
            "model_non_embedding_params": n_params, "prompt_tokens": args.prompt_tokens,
            "repeats": args.repeats, "rows": rows}


def markdown(result: dict) -> str:
    lines = [f"fp32 matmul: {result['matmul_fp32_flops'] / 1e9:.1f} GFLOP/s "
             f"({result['threads']} threads); model: {result['model_non_embedding_params']:,} "
             "non-embedding parameters", "",
             "| batch | new tokens | turnrl tok/s | generate tok/s | turnrl / generate | "
             "turnrl via model(...) tok/s | DecodeStep gain | "
             "turnrl % of matmul peak | generate % of peak |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(
            f"| {r['batch_size']} | {r['new_tokens']} | {r['turnrl_tokens_per_s']:.0f} | "
            f"{r['generate_tokens_per_s']:.0f} | {r['ratio']:.2f}x | "
            f"{r['model_forward_tokens_per_s']:.0f} | {r['decode_step_speedup']:.2f}x | "
            f"{100 * r['turnrl_flops_fraction']:.1f}% | "
            f"{100 * r['generate_flops_fraction']:.1f}% |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-sizes", nargs="*", type=int, default=[1, 16, 64])
    parser.add_argument("--new-tokens", nargs="*", type=int, default=[32, 128])
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    result = run(args)
    write_results(args.results_dir, "rollout", result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
