"""Multi-turn cost with and without KV reuse: wall time and prefilled tokens per episode.

A synthetic echo env (every observation is a fixed-length line of text, the episode lasts
exactly ``turns`` turns) is played by the tiny model through the real Runner and HFEngine,
once with the engine's per-episode KV cache reused between turns and once re-encoding the
whole conversation every turn, alternating, for ``turns`` in 1, 2, 4, ..., 32. With reuse the
prefilled tokens of an episode grow linearly with its turns; without it, quadratically.

    python bench/multiturn.py                       # 1..32 turns, 16 episodes per point
    python bench/multiturn.py --turns 1 4 --episodes 4

Writes ``bench/results/multiturn.json`` and ``multiturn.md`` (the table of
``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, write_results


class EchoEnv:
    """``turns`` turns; each observation is ``obs_chars`` characters; reward 0, then truncated."""

    def __init__(self, turns: int, obs_chars: int = 40) -> None:
        from turnrl.envs.protocol import EnvSpec

        self.spec = EnvSpec(id="echo-v0", entry_point=EchoEnv, max_turns=turns)
        self.turns, self.obs_chars, self._turn = turns, obs_chars, 0

    def reset(self, *, seed=None, options=None):
        self._turn = 0
        return [{"role": "user", "content": self._line(seed or 0)}], {}

    def step(self, action: str):
        from turnrl.types import StepResult

        self._turn += 1
        done = self._turn >= self.turns
        return StepResult([{"role": "user", "content": self._line(self._turn)}], 0.0, False,
                          done, {})

    def close(self) -> None:
        pass

    def _line(self, n: int) -> str:
        return (f"observation {n}: " + "abcdefghij" * 10)[: self.obs_chars]


def measure(args: argparse.Namespace) -> dict:
    import torch

    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.models.tiny import init_tiny_model
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.hf import HFEngine
    from turnrl.rollout.runner import Runner

    torch.set_num_threads(args.threads)
    path = init_tiny_model(Path(tempfile.mkdtemp(prefix="turnrl-multiturn-")) / "tiny")
    tokenizer = load_tokenizer(path)
    model = load_policy(path, dtype=torch.float32, device=torch.device("cpu")).eval()
    params = SamplingParams(max_new_tokens=args.reply_tokens, temperature=1.0)
    rows = []
    for turns in args.turns:
        result: dict[str, dict] = {}
        samples: dict[bool, list[tuple[float, int, int]]] = {True: [], False: []}
        for _ in range(args.repeats):
            for reuse in (True, False):  # alternate: machine drift hits both
                # eos -1: every reply has exactly reply_tokens tokens, in both modes
                engine = HFEngine(model, eos_token_id=-1, pad_token_id=tokenizer.pad_token_id,
                                  seed=0, reuse_kv=reuse)
                runner = Runner(engine, tokenizer, params, max_context_tokens=1 << 20)
                start = time.perf_counter()
                episodes = runner.collect(lambda t=turns: EchoEnv(t), list(range(args.episodes)),
                                          1)
                wall = time.perf_counter() - start
                assert all(e.num_turns == turns for e in episodes)
                samples[reuse].append((wall, engine.stats["prefill_tokens"],
                                       sum(len(e.token_ids) for e in episodes)))
        for reuse, runs in samples.items():
            result["reuse" if reuse else "reencode"] = {
                "wall_s_per_episode": statistics.median(r[0] for r in runs) / args.episodes,
                "prefill_tokens_per_episode": runs[0][1] / args.episodes,
                "ledger_tokens_per_episode": runs[0][2] / args.episodes,
            }
        rows.append({"turns": turns, **result,
                     "wall_ratio": result["reencode"]["wall_s_per_episode"]
                     / result["reuse"]["wall_s_per_episode"]})
        print(json.dumps(rows[-1]), flush=True)
    return {"threads": args.threads, "episodes": args.episodes, "reply_tokens": args.reply_tokens,
            "repeats": args.repeats, "rows": rows}


def markdown(result: dict) -> str:
    lines = ["| turns | ledger tokens | prefilled (reuse) | prefilled (re-encode) | "
             "s/episode (reuse) | s/episode (re-encode) | re-encode / reuse |",
             "|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        a, b = r["reuse"], r["reencode"]
        lines.append(f"| {r['turns']} | {a['ledger_tokens_per_episode']:.0f} | "
                     f"{a['prefill_tokens_per_episode']:.0f} | "
                     f"{b['prefill_tokens_per_episode']:.0f} | {a['wall_s_per_episode']:.3f} | "
                     f"{b['wall_s_per_episode']:.3f} | {r['wall_ratio']:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", nargs="*", type=int, default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--reply-tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--results-dir", default=str(RESULTS))
    args = parser.parse_args(argv)
    result = measure(args)
    write_results(args.results_dir, "multiturn", result, markdown(result))


if __name__ == "__main__":
    main(sys.argv[1:])
