"""The built-in ``guess-v0`` game written as an agent program (plain ``openai`` SDK).

The program holds a ``guess-v0`` env as its *user simulator*: the env holds a secret number
and answers the model's yes/no questions (``>8?``, ``<5?``) until it guesses (``guess 6``).
Each turn the program sends the whole conversation to the model, echoes the reply message
back into ``messages`` exactly as the SDK returned it (so the endpoint's capture continues
one token ledger for the whole run), steps the env with the reply's text and appends the
env's answer. This is the same game the env runner plays with ``env.id=guess-v0``; written
as agent code, it shows how an existing multi-turn program is trained through the endpoint.

Reward: the env pays per step (1.0 for a correct guess, else 0), so every model call gets
its step's reward (``call_rewards``) and the outcome adds nothing more: a run's return is
the env's total reward, as an env episode's is.

Tasks are ``{"seed": int}`` rows (the env's reset seed draws the secret), optionally with
``"env_kwargs"`` for the env (``{"high": 4}``: a secret in 1..4)::

    python examples/agents/guess_agent.py      # writes data/guess_*.jsonl if missing
    PYTHONPATH=examples/agents turnrl train agent.entry_point=guess_agent:solve \\
        agent.tasks=examples/agents/data/guess_tasks.jsonl \\
        agent.eval_tasks=examples/agents/data/guess_eval_tasks.jsonl \\
        sft.source=jsonl sft.path=examples/agents/data/guess_sft.jsonl \\
        sft.epochs=8 sft.batch_size=16 sft.lr=5e-3

``oracle_transcripts`` plays the env's oracle (binary search) and returns the
conversations, in the exact form the agent sends them, for ``sft.source=jsonl``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from example_data import DATA, data_main, write_jsonl_files

from turnrl import envs
from turnrl.agents.runner import AgentResult

ENV_ID = "guess-v0"
MODEL = "policy"  # the model id the endpoint serves (agent.model_name)
TRAIN_SEEDS = range(0, 1000)
EVAL_SEEDS = range(1_000_000, 1_000_200)  # held out: disjoint from TRAIN_SEEDS
SFT_CONVERSATIONS = 512
SFT_RANDOM_ACTION_PROB = 0.2  # imperfect demonstrations; the random replies are context only


def solve(client: Any, task: dict[str, Any]) -> AgentResult:
    """Play one ``guess-v0`` game against the model behind ``client`` (an ``openai.OpenAI``)."""
    env = envs.make(ENV_ID, **task.get("env_kwargs", {}))
    try:
        messages, _ = env.reset(seed=int(task["seed"]))
        call_rewards: list[float] = []
        info: dict[str, Any] = {}
        done = False
        while not done:  # the env ends every game within spec.max_turns steps
            reply = client.chat.completions.create(model=MODEL, messages=messages)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))  # echoed as returned
            step = env.step(message.content or "")
            messages.extend(step.observation)
            call_rewards.append(float(step.reward))
            info, done = step.info, step.terminated or step.truncated
    finally:
        env.close()
    return AgentResult(reward=0.0, call_rewards=call_rewards,
                       success=bool(info.get("success", False)),
                       info={"env_reward": sum(call_rewards), "turns": len(call_rewards)})


def make_tasks(seeds: Iterable[int], env_kwargs: dict[str, Any] | None = None
               ) -> list[dict[str, Any]]:
    """One task per env seed (with the env's ``env_kwargs``, if any)."""
    extra = {"env_kwargs": env_kwargs} if env_kwargs else {}
    return [{"seed": int(seed), **extra} for seed in seeds]


def oracle_transcripts(seeds: Iterable[int], random_action_prob: float = 0.0,
                       seed: int = 0, env_kwargs: dict[str, Any] | None = None
                       ) -> list[list[dict[str, Any]]]:
    """The env's oracle playing each seed's game, as the conversations the agent sends
    (system and opening, then reply and answer turn by turn). With probability
    ``random_action_prob`` a turn is a random well-formed reply instead (drawn from ``seed``),
    marked ``"weight": 0``: context the game moved through, not a reply to learn."""
    from turnrl.train.sft import oracle_demonstrations

    return oracle_demonstrations(functools.partial(envs.make, ENV_ID, **(env_kwargs or {})),
                                 list(seeds),
                                 random_action_prob=random_action_prob,
                                 train_random_actions=False, seed=seed)


def learnable(messages: list[dict[str, Any]]) -> bool:
    """Whether a transcript has a reply to learn (a game whose only replies were random,
    e.g. a random first guess, has none; ``sft.source=jsonl`` refuses such a line)."""
    return any(m["role"] == "assistant" and m.get("weight", 1) == 1 for m in messages)


def write_data(out: Path = DATA, *, force: bool = False) -> list[Path]:
    """Write the training tasks, the held-out tasks and the SFT transcripts under ``out``
    (each file only if missing, unless ``force``); returns the files written."""
    files = {
        "guess_tasks.jsonl": lambda: make_tasks(TRAIN_SEEDS),
        "guess_eval_tasks.jsonl": lambda: make_tasks(EVAL_SEEDS),
        "guess_sft.jsonl": lambda: [{"messages": m} for m in oracle_transcripts(
            TRAIN_SEEDS[:SFT_CONVERSATIONS], SFT_RANDOM_ACTION_PROB, seed=0) if learnable(m)],
    }
    return write_jsonl_files(out, files, force=force)


def main(argv: list[str]) -> None:
    data_main("Write the guess agent's tasks and SFT data.", write_data, argv)


if __name__ == "__main__":
    main(sys.argv[1:])
