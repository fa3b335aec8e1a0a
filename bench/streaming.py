"""Streaming through the agent endpoint: time to the first token against a decoding step.

A streamed chat completion (``stream: true``) read over raw HTTP (httpx, line by line: the
time is the server's, not an SDK's parsing), from the
built-in model's shape (``--model``, default ``tiny-random``: its replies run long, the
base's stop early) on the ``hf`` engine: for each request, the time
from sending it to the first content piece (TTFT) and the mean gap between later pieces (one
decoding step each, as the engine sends each step's token); and, beside it, the same
request unstreamed with the ``openai`` SDK (the whole reply's time), so the table shows the
first piece arriving long before the reply is done. Target: TTFT at most 2x a decoding step
(the first piece costs the prompt's prefill and one step; it must not wait for the reply).

Requests run one at a time (no batching: a lone agent's latency), each with its own seed and
up to ``--max-tokens`` new tokens; the model may end a reply early, so only requests with at
least 8 pieces count.

    python bench/streaming.py                     # 30 requests of 64 tokens
    python bench/streaming.py --requests 10 --max-tokens 32

Writes ``bench/results/streaming.json`` and ``streaming.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import statistics
import time

from common import RESULTS, write_results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="tiny-random")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    import httpx
    import openai
    import torch

    from turnrl.agents.protocol import Limits
    from turnrl.agents.server import ModelServer
    from turnrl.models.base import builtin_model_dir
    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.rollout.hf import HFEngine

    torch.set_num_threads(args.threads)
    path = builtin_model_dir(args.model) or args.model
    model = load_policy(path, dtype=torch.float32, device="cpu").eval()
    tokenizer = load_tokenizer(path)
    engine = HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                      pad_token_id=tokenizer.pad_token_id, seed=0)
    rows = []
    with ModelServer(engine, tokenizer, model_name="policy",
                     limits=Limits(max_tokens=args.max_tokens), max_context_tokens=2048,
                     open_access=True) as server:
        client = openai.OpenAI(base_url=server.url(), api_key="x", max_retries=0)
        http = httpx.Client(timeout=60)
        for i in range(args.requests + 2):  # the first two warm up
            ask = {"model": "policy", "max_tokens": args.max_tokens, "seed": i,
                   "messages": [{"role": "user", "content": f"Tell me a story, number {i}."}]}
            start = time.perf_counter()
            arrivals, first_event = [], None
            with http.stream("POST", server.url() + "/chat/completions",
                             json={**ask, "stream": True}) as reply:
                for line in reply.iter_lines():
                    if not line.startswith("data: {"):
                        continue
                    first_event = first_event or time.perf_counter() - start
                    choices = json.loads(line[6:])["choices"]
                    if choices and choices[0]["delta"].get("content"):
                        arrivals.append(time.perf_counter() - start)
            start = time.perf_counter()
            whole = client.chat.completions.create(**ask)
            whole_s = time.perf_counter() - start
            if i >= 2 and len(arrivals) >= 8:
                gaps = [b - a for a, b in itertools.pairwise(arrivals)]
                rows.append({"first_event_s": first_event, "ttft_s": arrivals[0],
                             "step_s": statistics.mean(gaps),
                             "last_piece_s": arrivals[-1], "pieces": len(arrivals),
                             "whole_s": whole_s,
                             "tokens": whole.usage.completion_tokens})
    if not rows:
        raise SystemExit("no request gave 8 pieces; raise --max-tokens")
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    ratio = med["ttft_s"] / med["step_s"]
    result = {"model": args.model, "requests": len(rows), "max_tokens": args.max_tokens,
              "threads": args.threads, "torch": torch.__version__,
              "python": platform.python_version(), "median": med,
              "ttft_over_step": ratio, "target_ttft_over_step": 2.0, "rows": rows}
    table = (f"Streamed chat completions through the endpoint (`{args.model}`, hf engine, "
             f"{args.threads} threads, one request at a time, up to {args.max_tokens} tokens; "
             f"medians of {len(rows)} requests)\n\n"
             "| first event (role) | first piece (TTFT) | decoding step (gap between pieces) | "
             "last piece | whole reply unstreamed | pieces | TTFT / step |\n"
             "|---|---|---|---|---|---|---|\n"
             f"| {1000 * med['first_event_s']:.1f} ms | {1000 * med['ttft_s']:.1f} ms | "
             f"{1000 * med['step_s']:.2f} ms | "
             f"{1000 * med['last_piece_s']:.1f} ms | {1000 * med['whole_s']:.1f} ms | "
             f"{med['pieces']:.0f} | {ratio:.2f}x (target <= 2x) |\n")
    write_results(args.out, "streaming", result, table)


if __name__ == "__main__":
    main()
