"""Learner throughput: right-padded vs length-bucketed vs packed forward passes, and peak RSS.

One policy-gradient optimizer step (``Learner._policy_step``: forward, loss, backward, clip,
AdamW) over a mini-batch of trajectories whose lengths vary as in multi-turn rollouts
(log-uniform between ``--min-len`` and ``--max-len`` tokens), with the default tiny model in
fp32. Layouts, each in its own subprocess so its peak RSS is its own, alternated over
``--repeats`` rounds:

- ``padded``: micro-batches of ``--micro`` trajectories in arrival order, right-padded to the
  longest of each (what a plain collator does);
- ``bucketed``: the same micro-batches cut from the length-sorted mini-batch (turnrl's
  default ``train.packing=false``);
- ``packed``: the mini-batch's trajectories packed end to end into rows as wide as its longest
  one, ``--micro`` rows per forward pass (``train.packing=true``).

Throughput counts real (non-padding) tokens per second; the median over steps and repeats is
reported with the padding fraction of the forward passes and the peak RSS.

    python bench/train_step.py
    python bench/train_step.py --batch 32 --steps 3 --repeats 1      # a quick look

Writes ``bench/results/train_step.json`` and ``train_step.md`` (a table of
``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, write_results

LAYOUTS = ("padded", "bucketed", "packed")


def make_batch(args: argparse.Namespace, vocab: int):
    """A laid-out training batch of ``args.batch`` random trajectories with log-uniform
    lengths; the second half of every trajectory is sampled tokens (loss mask 1)."""
    import torch

    from turnrl.train.layout import layout
    from turnrl.types import TrainBatch, Trajectory

    generator = torch.Generator().manual_seed(0)
    trajectories = []
    for i in range(args.batch):
        u = float(torch.rand((), generator=generator))
        n = int(math.exp(math.log(args.min_len) + u * (math.log(args.max_len)
                                                       - math.log(args.min_len))))
        ids = torch.randint(3, vocab, (n,), generator=generator).tolist()
        sampled = [0] * (n // 2) + [1] * (n - n // 2)
        trajectories.append(Trajectory(
            env_id="bench", seed=i, group_id=i // 8, messages=[], token_ids=ids,
            loss_mask=sampled, logprobs=[-1.0 * s for s in sampled],
            turn_index=[0 if s else -1 for s in sampled], turn_rewards=[float(i % 2)],
            terminated=True, truncated=False, info={}))
    tokens = layout(trajectories, pad_token_id=0)
    advantages = torch.randn(tokens.loss_mask.shape, generator=generator) * tokens.loss_mask
    # critic-free (grpo): the returns are the advantages; the policy step does not read them
    return TrainBatch(input_ids=tokens.input_ids, attention_mask=tokens.attention_mask,
                      loss_mask=tokens.loss_mask, old_logprobs=tokens.logprobs,
                      advantages=advantages, returns=advantages)


def child(args: argparse.Namespace) -> dict:
    """Time ``args.steps`` optimizer steps of one layout (runs in a subprocess)."""
    import torch

    from turnrl.algos.presets import PRESETS
    from turnrl.config import TrainConfig
    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.models.tiny import init_tiny_model
    from turnrl.train.learner import Learner
    from turnrl.train.microbatch import PassPlan

    torch.set_num_threads(args.threads)
    path = init_tiny_model(Path(tempfile.mkdtemp(prefix="turnrl-train-step-")) / "tiny")
    policy = load_policy(path, dtype=torch.float32, device=torch.device("cpu"))
    batch = make_batch(args, len(load_tokenizer(path)))
    # the whole batch is one mini-batch (one group per trajectory: n_groups * group_size is
    # the batch); padded passes are length-sorted only (no shared-prompt passes)
    train = TrainConfig(n_groups=args.batch, group_size=1, mini_batch_size=args.batch,
                        micro_batch_size=args.micro, packing=args.child == "packed",
                        share_prefix=False)

    class ArrivalOrder(PassPlan):
        """Micro-batches in arrival order, no length sorting: the plain padded collator."""

        def passes(self, batch, rows, *, packed=True):
            return list(rows.split(self.max_rows))

    learner = Learner(policy, PRESETS["grpo"], train)
    if args.child == "padded":
        learner.plan = ArrivalOrder(**dataclasses.asdict(learner.plan))
    rows = torch.arange(batch.size)
    passes = learner.plan.passes(batch, rows)
    real = int(batch.attention_mask.sum())
    if args.child == "packed":
        from turnrl.train.packing import pack

        width = int(batch.attention_mask.sum(-1).max())
        computed = 0
        for p in passes:
            micro = batch.select(p)
            computed += pack(micro.input_ids, micro.attention_mask,
                             capacity=width).input_ids.numel()
    else:
        computed = sum(batch.select(p).input_ids.numel() for p in passes)
    learner._policy_step(batch, rows)  # warm-up
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        learner._policy_step(batch, rows)
        times.append(time.perf_counter() - start)
    return {"layout": args.child, "real_tokens": real, "computed_tokens": computed,
            "step_s": times, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            / 1024}


def measure(args: argparse.Namespace) -> dict:
    runs: dict[str, list[dict]] = {layout: [] for layout in LAYOUTS}
    for _ in range(args.repeats):
        for layout in LAYOUTS:  # alternate: machine drift hits every layout
            cmd = [sys.executable, __file__, "--child", layout, "--batch", str(args.batch),
                   "--micro", str(args.micro), "--steps", str(args.steps), "--min-len",
                   str(args.min_len), "--max-len", str(args.max_len), "--threads",
                   str(args.threads)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs[layout].append(json.loads(out.strip().splitlines()[-1]))
            print(out.strip().splitlines()[-1], flush=True)
    rows = []
    for layout, results in runs.items():
        step_s = statistics.median(t for r in results for t in r["step_s"])
        real, computed = results[0]["real_tokens"], results[0]["computed_tokens"]
        rows.append({"layout": layout, "step_s": step_s, "tokens_per_s": real / step_s,
                     "padding_fraction": 1 - real / computed,
                     "peak_rss_mib": max(r["peak_rss_mib"] for r in results)})
    base = rows[0]["tokens_per_s"]
    for row in rows:
        row["speedup_vs_padded"] = row["tokens_per_s"] / base
    return {"batch": args.batch, "micro": args.micro, "min_len": args.min_len,
            "max_len": args.max_len, "steps": args.steps, "repeats": args.repeats,
            "threads": args.threads, "rows": rows}


def markdown(result: dict) -> str:
    lines = [f"Mini-batch of {result['batch']} trajectories ({result['min_len']}–"
             f"{result['max_len']} tokens, log-uniform), micro-batches of {result['micro']}, "
             f"tiny model fp32, {result['threads']} threads; median of "
             f"{result['steps']} steps × {result['repeats']} repeats.", "",
             "| layout | s/step | tokens/s | vs padded | padding in passes | peak RSS (MiB) |",
             "|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['layout']} | {r['step_s']:.3f} | {r['tokens_per_s']:.0f} | "
                     f"{r['speedup_vs_padded']:.2f}x | {r['padding_fraction']:.1%} | "
                     f"{r['peak_rss_mib']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--micro", type=int, default=16)
    parser.add_argument("--min-len", type=int, default=32)
    parser.add_argument("--max-len", type=int, default=512)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results-dir", default=str(RESULTS))
    parser.add_argument("--child", choices=LAYOUTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    result = measure(args)
    write_results(args.results_dir, "train_step", result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
