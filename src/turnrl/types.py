"""Plain data types shared by every pillar: messages, env steps, the token ledger, batches.

Shapes: ``B`` trajectories, ``T`` tokens, ``K`` agent turns.
"""

from __future__ import annotations

from dataclasses import Field, asdict, dataclass, field, fields, replace
from typing import Any, ClassVar, Literal, NamedTuple, NotRequired, Self, TypedDict

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
class EpisodeCounts:
    """What the runner counts over one episode's turns (``rollout/`` metrics)."""

    invalid_actions: int = 0  # turns whose step info said ``invalid_action``
    length_finishes: int = 0  # turns cut by ``rollout.max_new_tokens``
    context_overflow: int = 0  # 1 when the next prompt would not fit the context
    tool_calls: int = 0  # Σ of the steps' ``info["tool_calls"]``
    tool_errors: int = 0  # steps whose info said ``tool_error`` (a reply with no call too)
    tool_attempts: int = 0  # steps that tried a call: one ran, or one was malformed, named an
    # unknown tool or had bad arguments (``tool_error_kind`` other than ``no_call``)
    valid_tool_calls: int = 0  # steps whose call ran and returned without an error
    tool_uses: dict[str, int] = field(default_factory=dict)  # tool name -> calls that ran


@dataclass
class Trajectory:
    """One episode and its exact token ledger.

    ``token_ids`` is the prompt and every turn in order, exactly as fed to the model;
    the per-token lists all have ``len(token_ids)`` entries. What the framework records is a
    typed field; ``info`` carries the env's own extras (the gold ``answer``, the agent's
    ``final_answer``, ``retrieved`` evidence, ...), which reward functions may read.
    Built once by the runner and never changed afterwards: rewards are shaped into new
    tensors (``turnrl.train.scoring``), not written back here.
    """

    env_id: str
    seed: int
    group_id: int
    messages: list[Message]
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)  # 1 on tokens the policy sampled
    logprobs: list[float] = field(default_factory=list)  # behaviour log-prob, 0.0 elsewhere
    turn_index: list[int] = field(default_factory=list)  # turn of each token, -1 for the prompt
    turn_rewards: list[float] = field(default_factory=list)  # the env's, one per agent turn
    terminated: bool = False
    truncated: bool = False
    success: bool = False  # the env's last step said so, and nothing failed
    error: str | None = None  # why the episode failed (env raised or timed out), with a replay
    counts: EpisodeCounts | None = None  # the runner's counts (None: built by hand)
    state_keys: list[int] | None = None  # one id per turn (envs that declare state keys)
    policy_versions: list[int] | None = None  # weight version of each sampled token
    privileged_info: str | None = None  # the env's hidden facts (a privileged critic's input)
    worker: str | None = None  # the rollout worker that played it (Ray)
    agent: str | None = None  # the agent it played, in a multi-agent env (turnrl.envs.multi)
    policy: str | None = None  # the trained policy that sampled it (multi.policies; None: main)
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
        """JSON-ready form (used for ``samples/step_<n>.jsonl``); ``None`` fields are left
        out."""
        record = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.counts is not None:
            record["counts"] = asdict(self.counts)
        return {key: value for key, value in record.items() if value is not None}


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


PER_TOKEN = {"per_token": True}  # field metadata: a (B, T) tensor, cut to a selection's width


class _Rows:
    """Row selection and device moves shared by the batch types below: every tensor field is
    per row; those marked per-token are also cut to the selected rows' longest sequence."""

    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every subclass is a dataclass
    attention_mask: Tensor

    @property
    def size(self) -> int:
        return int(self.attention_mask.shape[0])

    def select(self, rows: Tensor) -> Self:
        """The sub-batch of ``rows``, per-token fields trimmed to its longest sequence (less
        padding to compute)."""
        width = int(self.attention_mask[rows].sum(-1).max().item())
        picked = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Tensor):
                picked[f.name] = value[rows, :width] if f.metadata.get("per_token") \
                    else value[rows]
        return replace(self, **picked)

    def to(self, device: Any) -> Self:
        """The tensors on ``device`` (the same object when they are there already)."""
        moved = {f.name: getattr(self, f.name).to(device)
                 for f in fields(self)
                 if isinstance(getattr(self, f.name), Tensor)}
        if all(moved[name] is getattr(self, name) for name in moved):
            return self
        return replace(self, **moved)


@dataclass(frozen=True)
class TokenBatch(_Rows):
    """The ledgers of B trajectories as right-padded tensors, built once by
    ``turnrl.train.layout.layout``. T = longest used ledger, K = most turns + 1 (a spare
    column where turn-level critics read the bootstrap value after the last turn).

    ``logprobs[b, t]`` is the sampling (behaviour) log-prob of token ``t``, 0 where
    ``loss_mask`` is 0; ``env_rewards`` are the env's own per-turn rewards, before shaping.
    """

    input_ids: Tensor = field(metadata=PER_TOKEN)  # (B, T) long
    attention_mask: Tensor = field(metadata=PER_TOKEN)  # (B, T) float, 1 on real tokens
    loss_mask: Tensor = field(metadata=PER_TOKEN)  # (B, T) float, 1 on sampled tokens
    logprobs: Tensor = field(metadata=PER_TOKEN)  # (B, T) float, sampling log-probs
    turn_index: Tensor = field(metadata=PER_TOKEN)  # (B, T) long, -1 outside turns
    turn_mask: Tensor  # (B, K) float, 1 where the turn exists
    env_rewards: Tensor  # (B, K) float
    group_ids: Tensor  # (B,) long
    terminated: Tensor  # (B,) bool
    state_keys: Tensor | None = None  # (B, K) long, -1 on missing turns
    critic_prefix_ids: Tensor | None = None  # (B, P) long, left-padded: privileged critic input
    critic_prefix_mask: Tensor | None = None  # (B, P) float, 1 on real prefix tokens


@dataclass(frozen=True)
class TrainBatch(_Rows):
    """What :meth:`turnrl.train.learner.Learner.update` trains on, built once per step.

    Per-token tensors are aligned with ``input_ids``: ``old_logprobs[b, t]`` is the log-prob
    the ratio is taken against (the sampling one, or the learner's own with a behaviour
    correction), ``advantages``/``returns`` come from the estimator, ``old_values`` are the
    critic's state values before the update (``V_t``), ``is_weights`` multiply the per-token
    loss. ``kl_coef`` weighs the ``KL(π‖π_ref)`` loss term (0 when KL is off or in reward).
    """

    input_ids: Tensor = field(metadata=PER_TOKEN)  # (B, T) long
    attention_mask: Tensor = field(metadata=PER_TOKEN)  # (B, T) float
    loss_mask: Tensor = field(metadata=PER_TOKEN)  # (B, T) float, 1 on tokens that carry loss
    old_logprobs: Tensor = field(metadata=PER_TOKEN)  # (B, T) float
    advantages: Tensor = field(metadata=PER_TOKEN)  # (B, T)
    returns: Tensor = field(metadata=PER_TOKEN)  # (B, T)
    ref_logprobs: Tensor | None = field(default=None, metadata=PER_TOKEN)  # (B, T)
    old_values: Tensor | None = field(default=None, metadata=PER_TOKEN)  # (B, T)
    is_weights: Tensor | None = field(default=None, metadata=PER_TOKEN)  # (B, T)
    critic_prefix_ids: Tensor | None = None  # (B, P) long
    critic_prefix_mask: Tensor | None = None  # (B, P) float
    kl_coef: float = 0.0
