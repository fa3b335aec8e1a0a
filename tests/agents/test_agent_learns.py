"""An agent program learns through the endpoint: held-out success rises with RL over its SFT
start, on three seeds (the agent twin of the smoke test on easy arithmetic)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from turnrl.config import load_config
from turnrl.train.loop import train

TINY_MODEL = ["model.tiny.hidden_size=32", "model.tiny.num_layers=1", "model.tiny.num_heads=2",
              "model.tiny.num_kv_heads=1", "model.tiny.intermediate_size=64"]


def sft_file(path: Path, n: int = 50) -> Path:
    """Demonstrations of the format only: "2+2=" answered 4 ± 5 at random (digits then EOS),
    so the SFT start is right about 1 time in 11."""
    rng = random.Random(0)
    lines = [json.dumps({"messages": [
        {"role": "user", "content": "2+2="},
        {"role": "assistant", "content": str(4 + rng.randint(-5, 5))}]}) for _ in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grpo_raises_an_agent_programs_success(seed: int, tmp_path: Path) -> None:
    """The agent (``agent_programs:answer``: one call, reward 1 for the right sum) is trained
    with 20 GRPO steps of 64 runs, every call through the HTTP endpoint. Measured held-out
    success (64 runs, T=1): seed 0 0.08 -> 0.97, seed 1 0.09 -> 1.00, seed 2 0.05 -> 0.92.
    Asserted: a gain of at least 0.2 on each."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"question": "2+2=", "answer": "4"}) + "\n")
    cfg = load_config(None, [
        "agent.entry_point=agent_programs:answer", f"agent.tasks={tasks}",
        "rollout.max_new_tokens=4", *TINY_MODEL, "sft.source=jsonl",
        f"sft.path={sft_file(tmp_path / 'sft.jsonl')}", "sft.lr=3e-2", "sft.epochs=8",
        "sft.batch_size=16", "algo.preset=grpo", "train.steps=20", "train.n_groups=8",
        "train.group_size=8", "train.mini_batch_size=64", "train.micro_batch_size=64",
        "train.lr=5e-3", "train.checkpoint_every=0", "train.save_samples=0",
        "eval.episodes=64", "log.progress=false", "log.tensorboard=false", "run.threads=1",
        f"run.seed={seed}", f"run.out_dir={tmp_path / 'runs'}"])
    result = train(cfg)
    assert result.before is not None and result.after is not None
    assert result.after["success"] >= result.before["success"] + 0.2, (result.before,
                                                                       result.after)
