"""The GPU check: one script, under 8 minutes on one H200, for when a GPU is lent.

No download: models are built from configs with random weights, in the shapes of
Qwen2.5-0.5B and Qwen2.5-7B, bf16. For each shape:

1. **Decode**: tokens/s of the vLLM engine vs transformers' ``model.generate`` at batch 64
   and 128 new tokens (every request forced to its full length), and the engine–forward
   log-prob gap of the sampled tokens.
2. **Colocation**: the engine's memory awake and asleep (``sleep_mode``), and the seconds a
   weight push takes (it wakes the engine).

Then **one GRPO step** of ``turnrl train`` with ``rollout.engine=vllm`` on the GPU (the 0.5B
shape with turnrl's tiny tokenizer, ``frozenlake-v0``): sleep during the update, wake and
push after it, ``rollout/logprob_abs_diff`` of that step, and the peak GPU memory.

``--engine hf`` runs the same checks with the built-in engine instead, where vLLM is not
installed: decode tokens/s against ``model.generate`` and the log-prob gap (no colocation:
the hf engine samples with the learner's own weights), then the GRPO step with
``rollout.engine=hf``.

    python bench/gpu_check.py                  # both shapes (7B decode is the long part)
    python bench/gpu_check.py --shapes 0.5b    # a quick check
    python bench/gpu_check.py --engine hf      # without vLLM

Needs CUDA, and for the default engine ``pip install 'turnrl[vllm]'``. Writes
``bench/results/gpu.json`` and ``gpu.md`` (``gpu_hf.*`` with ``--engine hf``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, write_results

SHAPES = {  # Qwen2.5 configs (hidden, intermediate, layers, heads, kv heads, vocab)
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                 num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
                 tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
               tie_word_embeddings=False),
}


def qwen_model(shape: str, vocab_size: int | None = None):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    kwargs = dict(SHAPES[shape])
    if vocab_size is not None:
        kwargs["vocab_size"] = vocab_size
    config = Qwen2Config(**kwargs, max_position_embeddings=4096, rope_theta=1e6,
                         architectures=["Qwen2ForCausalLM"])
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    return model.eval()


def used_gib() -> float:
    import torch

    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def random_prompts(vocab: int, batch: int) -> list[list[int]]:
    """``batch`` prompts of 64 random token ids (seeded)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    return [torch.randint(100, vocab, (64,), generator=gen).tolist() for _ in range(batch)]


def median_seconds(fn, repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``fn()``, each synchronised with the GPU."""
    import statistics

    import torch

    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def generate_seconds(model, prompts: list[list[int]], new_tokens: int, repeats: int = 1) -> float:
    """Seconds ``model.generate`` takes to sample ``new_tokens`` for every prompt at once."""
    import torch

    batch = torch.tensor(prompts, device="cuda")
    with torch.inference_mode():
        model.generate(input_ids=batch[:, :8], max_new_tokens=2, do_sample=True)  # warm-up
        return median_seconds(lambda: model.generate(
            input_ids=batch, attention_mask=torch.ones_like(batch), do_sample=True,
            temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=new_tokens,
            min_new_tokens=new_tokens), repeats)


def logprob_gap(model, prompt: list[int], completion):
    """|forward log-prob - engine log-prob| of each sampled token, shape ``(new_tokens,)``."""
    import torch

    from turnrl.models.policy import token_logprobs

    ids = torch.tensor([prompt + completion.token_ids], device="cuda")
    with torch.no_grad():
        fresh, _ = token_logprobs(model, ids, torch.ones_like(ids))
    return (fresh[0, len(prompt):].float().cpu() - torch.tensor(completion.logprobs)).abs()


def decode_hf(shape: str, args: argparse.Namespace) -> dict:
    """Decode tokens/s of the hf engine vs ``model.generate``, and the log-prob gap."""
    import torch

    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.hf import HFEngine

    model = qwen_model(shape)
    prompts = random_prompts(model.config.vocab_size, args.batch)
    engine = HFEngine(model, eos_token_id=-1, pad_token_id=0, seed=0,
                      max_batch_size=args.batch)
    params = [SamplingParams(max_new_tokens=args.new_tokens, seed=i) for i in range(args.batch)]
    engine.generate_batch(prompts[:4], [SamplingParams(max_new_tokens=4, seed=0)] * 4)
    torch.cuda.reset_peak_memory_stats()
    outs: list = []
    engine_s = median_seconds(lambda: outs.append(engine.generate_batch(prompts, params)),
                              args.repeats)
    peak = torch.cuda.max_memory_allocated() / 2**30
    assert all(len(o.token_ids) == args.new_tokens for o in outs[0])
    gap = logprob_gap(model, prompts[0], outs[0][0])
    generate_s = generate_seconds(model, prompts, args.new_tokens, args.repeats)
    tokens = args.batch * args.new_tokens  # the model is freed on return (main empties the cache)
    return {"shape": shape, "engine_tokens_per_s": tokens / engine_s,
            "generate_tokens_per_s": tokens / generate_s,
            "engine_over_generate": generate_s / engine_s,
            "logprob_abs_diff_mean": float(gap.mean()), "logprob_abs_diff_max": float(gap.max()),
            "peak_gib": peak}


def decode_and_colocation(shape: str, args: argparse.Namespace) -> dict:
    import torch

    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.vllm_engine import VLLMEngine

    model = qwen_model(shape)
    prompts = random_prompts(model.config.vocab_size, args.batch)
    base = used_gib()
    start = time.perf_counter()
    engine = VLLMEngine(model, eos_token_id=-1, max_model_len=1024, sleep_mode=True,
                        gpu_memory_utilization=args.gpu_memory_utilization,
                        max_batch_size=args.batch, enforce_eager=False)
    start_s = time.perf_counter() - start
    try:
        params = [SamplingParams(max_new_tokens=args.new_tokens, seed=i)
                  for i in range(args.batch)]
        engine.generate_batch(prompts[:4], params[:4])  # warm-up
        start = time.perf_counter()
        outs = engine.generate_batch(prompts, params)
        vllm_s = time.perf_counter() - start
        assert all(len(o.token_ids) == args.new_tokens for o in outs)
        gap = logprob_gap(model, prompts[0], outs[0])
        awake = used_gib()
        engine.sleep()
        asleep = used_gib()
        start = time.perf_counter()
        engine.load_weights(model)
        torch.cuda.synchronize()
        push_s = time.perf_counter() - start
    finally:
        engine.close()
    generate_s = generate_seconds(model, prompts, args.new_tokens)
    tokens = args.batch * args.new_tokens
    del model
    torch.cuda.empty_cache()
    return {"shape": shape, "engine_start_s": start_s,
            "vllm_tokens_per_s": tokens / vllm_s, "generate_tokens_per_s": tokens / generate_s,
            "vllm_over_generate": generate_s / vllm_s,
            "logprob_abs_diff_mean": float(gap.mean()), "logprob_abs_diff_max": float(gap.max()),
            "policy_gib": base, "engine_awake_gib": awake - base,
            "engine_asleep_gib": asleep - base, "push_s": push_s}


def grpo_step(args: argparse.Namespace) -> dict:
    import torch

    from turnrl.config import load_config
    from turnrl.models.tiny import build_tokenizer
    from turnrl.train.loop import train

    out = Path(tempfile.mkdtemp(prefix="turnrl-gpu-"))
    tokenizer = build_tokenizer()
    model = qwen_model("0.5b", vocab_size=len(tokenizer))
    model.save_pretrained(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    del model
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    engine = (["rollout.engine=vllm", "rollout.gpu_memory_utilization=0.3"]
              if args.engine == "vllm" else ["rollout.engine=hf"])
    result = train(load_config(None, [
        f"model.path={out / 'model'}", "run.device=cuda", *engine, "sft.enabled=false",
        "train.steps=1", "train.n_groups=8", "train.group_size=4", "train.mini_batch_size=32",
        "eval.episodes=16", "eval.before_training=false", "log.progress=false",
        "log.tensorboard=false", f"run.out_dir={out}"]))
    wall = time.perf_counter() - start
    records = [json.loads(line) for line in
               (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in records if r.get("phase") == "train")
    return {"wall_s": wall, "step_s": step["perf/step_s"],
            "rollout_s": step["perf/rollout_s"], "update_s": step["perf/update_s"],
            "logprob_abs_diff": step.get("rollout/logprob_abs_diff"),
            "logprob_abs_diff_max": step.get("rollout/logprob_abs_diff_max"),
            "peak_torch_gib": torch.cuda.max_memory_allocated() / 2**30}


def markdown(result: dict) -> str:
    lines = [f"{result['device']}, {result['engine']} engine (vLLM {result['vllm']}), torch "
             f"{result['torch']}, transformers {result['transformers']}; batch "
             f"{result['batch']} x {result['new_tokens']} new tokens, bf16; hf engine and "
             f"generate: median of {result['repeats']} timed decodes", ""]
    if result["engine"] == "vllm":
        lines += ["| shape | vllm tok/s | generate tok/s | vllm / generate | logprob |diff| mean "
                  "| engine awake GiB | asleep GiB | push s |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['shape']} | {r['vllm_tokens_per_s']:.0f} | "
                  f"{r['generate_tokens_per_s']:.0f} | {r['vllm_over_generate']:.1f}x | "
                  f"{r['logprob_abs_diff_mean']:.1e} | {r['engine_awake_gib']:.1f} | "
                  f"{r['engine_asleep_gib']:.1f} | {r['push_s']:.2f} |" for r in result["shapes"]]
    else:
        lines += ["| shape | hf engine tok/s | generate tok/s | engine / generate | logprob "
                  "|diff| mean | max | peak GiB |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['shape']} | {r['engine_tokens_per_s']:.0f} | "
                  f"{r['generate_tokens_per_s']:.0f} | {r['engine_over_generate']:.1f}x | "
                  f"{r['logprob_abs_diff_mean']:.1e} | {r['logprob_abs_diff_max']:.1e} | "
                  f"{r['peak_gib']:.1f} |" for r in result["shapes"]]
    if "grpo_step" in result:
        g = result["grpo_step"]
        how = ("vllm engine, sleep/wake and push" if result["engine"] == "vllm"
               else "hf engine")
        gap = ("" if g["logprob_abs_diff"] is None  # the hf engine samples with the learner
               else f"logprob |diff| {g['logprob_abs_diff']:.1e}, ")
        lines += ["", f"One GRPO step (0.5B shape, {how}): "
                  f"{g['step_s']:.1f} s (rollout {g['rollout_s']:.1f} s, update "
                  f"{g['update_s']:.1f} s), {gap}"
                  f"peak torch memory {g['peak_torch_gib']:.1f} GiB"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="*", default=["0.5b", "7b"], choices=list(SHAPES))
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.4)
    parser.add_argument("--engine", default="vllm", choices=["vllm", "hf"])
    parser.add_argument("--repeats", type=int, default=3,
                        help="timed decodes per engine (hf engine): the median is reported")
    parser.add_argument("--skip-grpo", action="store_true")
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    import torch
    import transformers

    from turnrl.packages import installed

    if not torch.cuda.is_available():
        sys.exit("bench/gpu_check.py needs a CUDA device")
    if args.engine == "vllm" and not installed("vllm"):
        sys.exit("bench/gpu_check.py needs vLLM (pip install 'turnrl[vllm]'), "
                 "or --engine hf to check the built-in engine")
    vllm_version = None
    if args.engine == "vllm":
        import vllm

        vllm_version = vllm.__version__
    result: dict = {"device": torch.cuda.get_device_name(), "engine": args.engine,
                    "vllm": vllm_version, "torch": torch.__version__,
                    "transformers": transformers.__version__, "batch": args.batch,
                    "new_tokens": args.new_tokens, "repeats": args.repeats,
                    "shapes": []}
    decode = decode_and_colocation if args.engine == "vllm" else decode_hf
    for shape in args.shapes:
        result["shapes"].append(decode(shape, args))
        torch.cuda.empty_cache()
        print(json.dumps(result["shapes"][-1]), flush=True)
    if not args.skip_grpo:
        result["grpo_step"] = grpo_step(args)
        print(json.dumps(result["grpo_step"]), flush=True)
    stem = "gpu" if args.engine == "vllm" else "gpu_hf"
    write_results(args.results_dir, stem, result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
