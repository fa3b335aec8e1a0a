"""Supervised fine-tuning on conversations: oracle demonstrations or a JSONL file.

The loss is the mean negative log-likelihood of assistant tokens (content + EOS) only;
system, user and tool tokens are context. Conversations become token ledgers exactly as
in RL (``models.chat.ledger_from_messages``), so SFT trains on the tokens RL samples.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from turnrl.envs.protocol import Env, HasActionSampler, HasOracle, HasTools
from turnrl.models.chat import ledger_from_messages
from turnrl.models.policy import token_logprobs
from turnrl.rollout.guard import EnvCalls, EnvFailure, episode_error
from turnrl.train.layout import layout
from turnrl.train.microbatch import bucketed_batches
from turnrl.types import Message, Trajectory

log = logging.getLogger("turnrl")

VALID_ROLES = ("system", "user", "assistant", "tool")
STOP_WINDOW = 10  # steps whose mean loss sft.stop_loss compares (one step's loss is noisy)


class DatasetError(ValueError):
    """A conversation file that cannot be used, naming the file, line and fix."""


@dataclass(frozen=True)
class Demonstrations:
    """What playing the oracle gave: the conversations and the failures (one message each,
    with the env, the seed, where it failed and how to replay it)."""

    conversations: list[list[Message]]
    failures: list[str]
    played: int  # episodes played (failed ones too)

    @property
    def metrics(self) -> dict[str, float]:
        """``sft/env_errors`` and ``sft/env_error_rate`` of the demonstrations played."""
        return {"sft/env_errors": float(len(self.failures)),
                "sft/env_error_rate": len(self.failures) / max(self.played, 1)}


def play_demonstrations(make_env: Callable[[], Env], seeds: Sequence[int], *,
                        random_action_prob: float, train_random_actions: bool = True,
                        seed: int = 0, calls: EnvCalls | None = None,
                        keep_failed: bool = False) -> Demonstrations:
    """Play each seed with the env's oracle; with probability ``random_action_prob`` a turn
    takes ``env.sample_action(rng)`` instead, so the demonstrations are imperfect (not in an
    env whose spec says ``demo_random_actions=False``: dataset-v0's one reply is its answer). With
    ``train_random_actions=False`` a random action that differs from the oracle's gets
    ``"weight": 0``: it still moves the episode to states the oracle would not visit, but
    only the oracle's actions are learned (noise injection, as in DART, Laskey et al. 2017).

    Every env call goes through ``calls`` (as in rollouts: ``env.step_timeout_s``, results
    validated). An episode whose env fails is left out, or with ``keep_failed``
    (``env.on_error=score``) kept as far as it was played when it has a reply to learn; if
    every one fails, a ``DatasetError``."""
    calls = calls or EnvCalls()
    rng = random.Random(seed)
    conversations: list[list[Message]] = []
    failures: list[str] = []
    for task_seed in seeds:
        env = make_env()
        if not env.spec.has_oracle:
            raise DatasetError(f"env {env.spec.id!r} has no oracle; use sft.source=jsonl")
        if random_action_prob > 0 and not isinstance(env, HasActionSampler):
            raise DatasetError(f"env {env.spec.id!r} cannot sample random actions; "
                               "set sft.random_action_prob=0")
        played, failure = asyncio.run(_demonstration(
            env, task_seed, rng, calls, random_action_prob, train_random_actions))
        if failure is not None:  # a failing env loses this demonstration only
            failures.append(failure)
        if failure is None or (keep_failed and any(m["role"] == "assistant" for m in played)):
            conversations.append(played)
    if failures and not conversations:
        raise DatasetError(f"every oracle demonstration failed; the last: {failures[-1]}")
    return Demonstrations(conversations, failures, played=len(seeds))


def oracle_demonstrations(make_env: Callable[[], Env], seeds: Sequence[int], *,
                          random_action_prob: float, train_random_actions: bool = True,
                          seed: int = 0, calls: EnvCalls | None = None) -> list[list[Message]]:
    """The conversations of :func:`play_demonstrations` (failed episodes left out)."""
    return play_demonstrations(make_env, seeds, random_action_prob=random_action_prob,
                               train_random_actions=train_random_actions, seed=seed,
                               calls=calls).conversations


async def _demonstration(env: Env, task_seed: int, rng: random.Random, calls: EnvCalls,
                         random_action_prob: float, train_random_actions: bool
                         ) -> tuple[list[Message], str | None]:
    """One oracle episode: its messages so far and, if the env failed, why."""
    messages: list[Message] = []
    where = "env.reset"
    try:
        reset, _ = await calls.reset(env, task_seed)
        messages = list(reset)
        for turn in range(env.spec.max_turns):
            where = f"oracle_action at turn {turn}"
            action = expert = await calls.text(env, cast(HasOracle, env).oracle_action)
            if action is None:
                break
            if rng.random() < random_action_prob and env.spec.demo_random_actions:
                where = f"sample_action at turn {turn}"
                action = await calls.text(env, cast(HasActionSampler, env).sample_action, rng)
                assert action is not None
            reply: Message = {"role": "assistant", "content": action}
            if not train_random_actions and action != expert:
                reply["weight"] = 0
            messages.append(reply)
            where = f"env.step at turn {turn}"
            result = await calls.step(env, action)
            messages.extend(result.observation)
            if result.terminated or result.truncated:
                break
        return messages, None
    except EnvFailure as failure:
        # the env's own exception, e.g. "ValueError: tool crashed", not the wrapper's
        cause = failure.__cause__ if isinstance(failure.__cause__, Exception) else failure
        return messages, episode_error(env, task_seed, where, cause)
    finally:
        await calls.close(env)


def env_tools(make_env: Callable[[], Env], calls: EnvCalls | None = None) -> list[dict] | None:
    """The env's JSON tool schemas (None without tools), for rendering demonstrations as
    the runner renders episodes; a failing env is a ``DatasetError``."""
    calls = calls or EnvCalls()
    env = make_env()

    async def schemas() -> list[dict] | None:
        try:  # declared by the spec, so implemented (check_env checks that they agree)
            return (await calls.call(env, cast(HasTools, env).tool_schemas)
                    if env.spec.tools else None)
        finally:
            await calls.close(env)

    try:
        return asyncio.run(schemas())
    except EnvFailure as failure:
        raise DatasetError(f"SFT needs the tool schemas of env {env.spec.id}: "
                           f"{failure}") from None


def load_conversations(path: str | Path) -> list[list[Message]]:
    """Read a JSONL file with one ``{"messages": [{"role": ..., "content": ...}]}`` per line;
    an assistant message may carry ``"weight": 0`` (context, not trained on) or 1."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"sft.path {str(path)!r} does not exist; give a JSONL file of "
                           'lines like {"messages": [{"role": "user", "content": "..."}, ...]}')
    conversations = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{where}: not valid JSON ({error.msg})") from None
        messages = record.get("messages") if isinstance(record, dict) else None
        if not isinstance(messages, list) or not messages:
            raise DatasetError(f"{where}: expected an object with a non-empty 'messages' list")
        for i, message in enumerate(messages):
            if (not isinstance(message, dict) or message.get("role") not in VALID_ROLES
                    or not isinstance(message.get("content"), str)):
                raise DatasetError(f"{where}: messages[{i}] must be {{'role': one of "
                                   f"{', '.join(VALID_ROLES)}, 'content': str}}, got {message!r}")
            if message.get("weight", 1) not in (0, 1) or isinstance(message.get("weight"), bool):
                raise DatasetError(f"{where}: messages[{i}].weight must be 0 (context only) or "
                                   f"1 (trained on), got {message['weight']!r}")
        if not any(m["role"] == "assistant" and m.get("weight", 1) == 1 for m in messages):
            raise DatasetError(f"{where}: no assistant message with weight 1, so nothing to "
                               "learn from")
        conversations.append(messages)
    if not conversations:
        raise DatasetError(f"{path}: no conversations found")
    return conversations


def conversations_to_trajectories(tokenizer: PreTrainedTokenizerBase,
                                  conversations: Sequence[list[Message]], *,
                                  tools: list[dict] | None = None) -> list[Trajectory]:
    """Token ledgers of finished conversations (loss_mask = assistant tokens); ``tools`` are
    the env's JSON tool schemas, rendered as the runner renders them."""
    trajectories = []
    for i, messages in enumerate(conversations):
        ledger = ledger_from_messages(tokenizer, messages, tools=tools)
        trajectories.append(Trajectory(
            env_id="sft", seed=i, group_id=i, messages=ledger.messages,
            token_ids=ledger.token_ids, loss_mask=ledger.loss_mask, logprobs=ledger.logprobs,
            turn_index=ledger.turn_index,
        ))
    return trajectories


def sft_steps(policy: nn.Module, trajectories: Sequence[Trajectory], *, pad_token_id: int,
              epochs: int, batch_size: int, lr: float, max_grad_norm: float,
              seed: int = 0, stop_loss: float | None = None,
              stop_window: int = STOP_WINDOW) -> Iterator[dict[str, float]]:
    """Yield metrics after each optimizer step (AdamW, cosine decay over ``epochs``,
    gradient clipping).

    ``stop_loss``: end early, after the first step at which the mean loss of the last
    ``stop_window`` steps is at most this (nats per assistant token); the learning rate
    schedule is the one of all ``epochs``, cut where training stopped.

    Demonstrations with no trained token (every reply ``"weight": 0``, or none at all: a
    random first move that ended the episode) are left out, so no step trains on nothing;
    ``sft/empty_demos`` counts them (the same on every step). Raises :class:`DatasetError`
    (a ``ValueError``) when no demonstration has a token to train."""
    empty = sum(1 for t in trajectories if not any(t.loss_mask))
    trajectories = [t for t in trajectories if any(t.loss_mask)]
    if not trajectories:
        raise DatasetError(f"none of the {empty} SFT demonstrations has a reply to learn (every "
                         "reply has weight 0, or the episodes end before the first reply); "
                         "with sft.train_random_actions=false lower sft.random_action_prob")
    batch = layout(trajectories, pad_token_id, bootstrap_truncated=False)
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=lr)
    steps_per_epoch = math.ceil(batch.size / batch_size)
    total = max(1, epochs * steps_per_epoch)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    generator = torch.Generator().manual_seed(seed)
    device = next(policy.parameters()).device  # batches are laid out on the CPU
    policy.train()
    recent: deque[float] = deque(maxlen=stop_window)
    for epoch in range(epochs):
        for rows in bucketed_batches(batch, batch_size, generator):
            micro = batch.select(rows).to(device)
            logprobs, _ = token_logprobs(policy, micro.input_ids, micro.attention_mask)
            tokens = micro.loss_mask.sum().clamp(min=1.0)
            loss = -(logprobs * micro.loss_mask).sum() / tokens
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = float(torch.nn.utils.clip_grad_norm_(
                [p for p in policy.parameters() if p.requires_grad], max_grad_norm))
            optimizer.step()
            scheduler.step()
            value = loss.item()
            yield {"sft/loss": value, "sft/grad_norm": grad_norm,
                   "sft/tokens": float(tokens), "sft/epoch": float(epoch),
                   "sft/lr": scheduler.get_last_lr()[0], "sft/empty_demos": float(empty)}
            recent.append(value)
            if stop_loss is not None and len(recent) == stop_window \
                    and sum(recent) / stop_window <= stop_loss:
                return
