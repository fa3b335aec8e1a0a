"""Agent programs learn through the endpoint: held-out success rises with RL over the SFT
start, on three seeds each: a one-call test agent (the agent twin of the smoke test on easy
arithmetic), and the guess example (``examples/agents/guess_agent.py``), a multi-turn program
with a user simulator, run in a worker process as ``turnrl train`` runs it."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from turnrl.config import load_config
from turnrl.train.loop import train

TINY_MODEL = ["model.path=tiny-random", "model.tiny.hidden_size=32", "model.tiny.num_layers=1",
              "model.tiny.num_heads=2", "model.tiny.num_kv_heads=1",
              "model.tiny.intermediate_size=64"]


def train_with_grpo(tmp_path: Path, seed: int, overrides: list[str]) -> dict:
    """SFT then GRPO on 8 tasks x 8 runs a step, held-out success over 64 runs before and
    after RL, on the 1-layer tiny model; ``overrides`` name the agent, its data and rates.
    The run's evaluations (after SFT, after RL), checked to be there."""
    cfg = load_config(None, [
        *TINY_MODEL, "sft.source=jsonl", "sft.batch_size=16", "algo.preset=grpo",
        "train.n_groups=8", "train.group_size=8", "train.mini_batch_size=64",
        "train.micro_batch_size=64", "train.checkpoint_every=0", "train.save_samples=0",
        "eval.episodes=64", "log.progress=false", "log.tensorboard=false", "run.threads=1",
        f"run.seed={seed}", f"run.out_dir={tmp_path / 'runs'}", *overrides])
    result = train(cfg)
    assert result.before is not None and result.after is not None
    return {"before": result.before, "after": result.after}


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
    success (64 runs, T=1): seed 0 0.02 -> 0.97, seed 1 0.09 -> 0.95, seed 2 0.02 -> 0.94.
    Asserted: a gain of at least 0.2 on each."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"question": "2+2=", "answer": "4"}) + "\n")
    result = train_with_grpo(tmp_path, seed, [
        "agent.entry_point=agent_programs:answer", f"agent.tasks={tasks}",
        "rollout.max_new_tokens=4", f"sft.path={sft_file(tmp_path / 'sft.jsonl')}",
        "sft.lr=3e-2", "sft.epochs=8", "train.steps=20", "train.lr=5e-3"])
    assert result["after"]["success"] >= result["before"]["success"] + 0.2, result


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
GUESS_KWARGS = {"high": 2}  # a secret of 1 or 2: one question (">1?"), then the guess


def guess_files(tmp_path: Path) -> dict[str, Path]:
    """The guess example's tasks (training and held-out seeds, ``high=2``) and its SFT file:
    the oracle's own transcripts, where 70% of the final guesses are replaced by a uniform
    random one, so the SFT start asks its question and then is right about 65% of the time
    (it has not learned to read the answer)."""
    sys.path.insert(0, str(EXAMPLES))
    import guess_agent

    rng = random.Random(0)
    conversations = []
    for messages in guess_agent.oracle_transcripts(range(200), env_kwargs=GUESS_KWARGS):
        last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
        guess = (f"guess {rng.randint(1, 2)}" if rng.random() < 0.7
                 else messages[last]["content"])
        conversations.append([*messages[:last], {"role": "assistant", "content": guess}])
    rows = {"tasks.jsonl": guess_agent.make_tasks(range(500), GUESS_KWARGS),
            "eval.jsonl": guess_agent.make_tasks(range(10**6, 10**6 + 64), GUESS_KWARGS),
            "sft.jsonl": [{"messages": m} for m in conversations]}
    for name, values in rows.items():
        (tmp_path / name).write_text("".join(json.dumps(v) + "\n" for v in values))
    return {name.removesuffix(".jsonl"): tmp_path / name for name in rows}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grpo_teaches_the_guess_example_to_use_its_users_answers(seed: int,
                                                                 tmp_path: Path) -> None:
    """30 GRPO steps of 64 runs (8 tasks x 8), every turn an HTTP call from the example's
    ``openai``-SDK program in its worker process. Measured held-out success (64 runs,
    T=1): seed 0 0.56 -> 0.92, seed 1 0.64 -> 0.95, seed 2 0.66 -> 0.95 (about 30 s each;
    the runs are seeded, so their samples do not depend on timing). Asserted: a gain of at
    least 0.2 on each."""
    files = guess_files(tmp_path)
    result = train_with_grpo(tmp_path, seed, [
        "agent.entry_point=guess_agent:solve", f"agent.tasks={files['tasks']}",
        f"agent.eval_tasks={files['eval']}", "rollout.max_new_tokens=8",
        f"sft.path={files['sft']}", "sft.lr=1e-2", "sft.epochs=16", "train.steps=30",
        "train.lr=2e-3"])
    assert result["after"]["success"] >= result["before"]["success"] + 0.2, result
