"""Plain data types shared by every pillar: messages, env steps, the token ledger, batches.

Shapes: ``B`` trajectories, ``T`` tokens, ``K`` agent turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict

from torch import Tensor


class Message(TypedDict):
    """An OpenAI-style chat message."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    weight: NotRequired[int]  # SFT only: an assistant message with weight 0 is not trained on


@dataclass
class StepResult:
    """What ``Env.step(action)`` returns (Gymnasium's 5-tuple as named fields)."""

    observation: list[Message]  # messages appended after the agent's turn
    reward: float  # reward for this turn (0.0 when only the outcome counts)
    terminated: bool  # the task ended (solved or failed)
    truncated: bool  # a budget ran out (turns, tokens, time)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Trajectory:
    """One episode and its exact token ledger.

    ``token_ids`` is the prompt and every turn in order, exactly as fed to the model;
    the per-token lists all have ``len(token_ids)`` entries.
    """

    env_id: str
    seed: int
    group_id: int
    messages: list[Message]
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)  # 1 on tokens the policy sampled
    logprobs: list[float] = field(default_factory=list)  # behaviour log-prob, 0.0 elsewhere
    turn_index: list[int] = field(default_factory=list)  # turn of each token, -1 for the prompt
    turn_rewards: list[float] = field(default_factory=list)  # one per agent turn
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def num_turns(self) -> int:
        return len(self.turn_rewards)

    @property
    def total_reward(self) -> float:
        return float(sum(self.turn_rewards))

    @property
    def num_sampled_tokens(self) -> int:
        return int(sum(self.loss_mask))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (used for ``samples/step_<n>.jsonl``)."""
        return {
            "env_id": self.env_id,
            "seed": self.seed,
            "group_id": self.group_id,
            "messages": self.messages,
            "token_ids": self.token_ids,
            "loss_mask": self.loss_mask,
            "logprobs": self.logprobs,
            "turn_index": self.turn_index,
            "turn_rewards": self.turn_rewards,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "info": self.info,
        }


@dataclass
class AdvantageInputs:
    """Everything an advantage estimator may read. B trajectories, T tokens, K turns.

    ``values[b, t]`` is the critic's output at position ``t``: the value of the state after
    reading ``tokens[b, : t + 1]``. The state in which token ``t`` was sampled is therefore
    valued by ``values[b, t - 1]``, and a truncated episode bootstraps from ``values`` at its
    last real position (``attention_mask``).
    """

    token_mask: Tensor  # (B, T) float, 1 on sampled tokens
    turn_index: Tensor  # (B, T) long, turn of each token, -1 outside turns
    turn_rewards: Tensor  # (B, K) float
    turn_mask: Tensor  # (B, K) float, 1 where the turn exists
    group_ids: Tensor  # (B,) long, episodes of one task share an id
    terminated: Tensor  # (B,) bool; False means truncated: bootstrap if a critic exists
    attention_mask: Tensor | None = None  # (B, T) float, 1 on real (non-padding) tokens
    values: Tensor | None = None  # (B, T) token-level critic
    turn_values: Tensor | None = None  # (B, K) turn-level critic
    state_keys: Tensor | None = None  # (B, K) long ids of states, for step-level grouping


class AdvantageOutputs(NamedTuple):
    """What every advantage estimator returns."""

    advantages: Tensor  # (B, T), zero outside token_mask
    returns: Tensor  # (B, T), critic targets (equal to advantages for critic-free methods)
    metrics: dict[str, float]


@dataclass
class Batch:
    """Right-padded tensors for the learner, built from trajectories by ``train.batch.layout``.

    Per-token tensors are aligned with ``input_ids``: ``old_logprobs[b, t]`` is the
    behaviour log-prob of token ``t`` (0 where ``loss_mask`` is 0).
    """

    input_ids: Tensor  # (B, T) long
    attention_mask: Tensor  # (B, T) float
    loss_mask: Tensor  # (B, T) float, 1 on sampled tokens
    old_logprobs: Tensor  # (B, T) float
    adv_inputs: AdvantageInputs
    adv: Tensor | None = None  # (B, T)
    ret: Tensor | None = None  # (B, T)
    ref_logprobs: Tensor | None = None  # (B, T)
    old_values: Tensor | None = None  # (B, T)
    is_weights: Tensor | None = None  # (B, T) behaviour-policy correction weights of the loss
    critic_prefix_ids: Tensor | None = None  # (B, P) long, left-padded: privileged critic input
    critic_prefix_mask: Tensor | None = None  # (B, P) float, 1 on real prefix tokens

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])

    def to(self, device: Any) -> Batch:
        """The per-row tensors on ``device`` (the same object when they are there already);
        ``adv_inputs``, the whole-batch view the advantage estimators read, stays where it
        is."""
        moved = {f.name: getattr(self, f.name).to(device) for f in fields(self)
                 if f.name != "adv_inputs" and getattr(self, f.name) is not None}
        if all(moved[name] is getattr(self, name) for name in moved):
            return self
        return replace(self, **moved)
