"""The learning sections of the config tree (SFT warm-up, rewards, the RL algorithm, the
critic, the RL loop, held-out evaluation) and the root :class:`Config` that holds every
section, so ``Config()`` is a valid config.

Cross-field checks raise :class:`~turnrl.config.errors.FieldError` to blame one key (and
name the related ones), so the error points at the right line of the user's file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, PrivateAttr, model_validator

from turnrl.config.algo import AlgoConfig
from turnrl.config.errors import FieldError, Origin
from turnrl.config.sections import (
    AgentConfig,
    AlarmsConfig,
    DistributedConfig,
    EnvConfig,
    LogConfig,
    ModelConfig,
    MultiConfig,
    RolloutConfig,
    RunConfig,
    Section,
)


class SFTConfig(Section):
    """Supervised warm-up on demonstrations before RL."""

    enabled: bool = Field(True, description="Run SFT before RL.")
    source: Literal["oracle", "jsonl"] = Field(
        "oracle", description="oracle = the env's expert (oracle_action); jsonl = a file."
    )
    path: str | None = Field(
        None, description="JSONL file of demonstrations; required when source is jsonl."
    )
    episodes: int = Field(2000, ge=1, description="Oracle episodes to generate.")
    random_action_prob: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Chance the oracle demo takes a random action (imperfect demonstrations).",
    )
    train_random_actions: bool = Field(
        True, description="Learn the random actions too; false = they only steer the demo to "
        "off-oracle states and the oracle's actions there are learned (DART noise injection)."
    )
    epochs: int = Field(2, ge=1, description="Passes over the demonstrations.")
    batch_size: int = Field(32, ge=1, description="Episodes per optimizer step.")
    lr: float = Field(2e-3, gt=0, description="AdamW learning rate (cosine decay to 0).")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient-norm clip.")
    stop_loss: float | None = Field(
        None, gt=0, description="End SFT early once the mean loss of the last 10 steps is at "
        "most this (nats per assistant token); epochs is then the most it runs and sets the "
        "learning-rate schedule. None = run every epoch."
    )

    @model_validator(mode="after")
    def _check_path(self) -> SFTConfig:
        if self.source == "jsonl" and not self.path:
            raise FieldError(
                "path",
                "required when sft.source is 'jsonl'; set sft.path to a JSONL file of "
                "demonstrations, or use sft.source: oracle",
                related=("source",),
            )
        return self


class RewardConfig(Section):
    """Reward functions (``turnrl.rewards``) added to the env's own rewards."""

    env_weight: float = Field(1.0, description="Weight of the env's own per-turn rewards.")
    terms: list[dict[str, Any] | str] = Field(
        default_factory=list, description="Reward functions added on the last turn: names "
        "(exact_match, f1, math_verify, format, tool_cost, invalid_cost, length_penalty, "
        "grounded) or {name, weight, kwargs, label}; name may be 'package.module:function'."
    )


class CriticConfig(Section):
    """The critic of the critic presets (advantages gae, turn_gae); ignored by the others."""

    lr: float = Field(1e-3, gt=0, description="AdamW learning rate of the critic.")
    shared: bool = Field(
        False, description="A value head on the policy's body (one model, joint loss "
        "policy + vf_coef * value) instead of a separate copy of the body."
    )
    vf_coef: float = Field(0.5, gt=0, description="Weight of the value loss when shared.")
    privileged: bool = Field(
        False, description="Give the critic the env's privileged_info() ahead of the "
        "episode (asymmetric actor-critic); the policy never sees it. Needs shared=false."
    )
    warmup_steps: int = Field(
        0, ge=0, description="First RL steps that train only the critic (the policy waits)."
    )

    @model_validator(mode="after")
    def _check_privileged(self) -> CriticConfig:
        if self.privileged and self.shared:
            raise FieldError(
                "privileged",
                "a privileged critic needs its own body: with critic.shared=true the policy's "
                "weights would learn from the privileged input; set critic.shared=false or "
                "critic.privileged=false",
                related=("shared",),
            )
        return self


MINI_BATCH = 64  # train.mini_batch_size when not set, for batches of more trajectories
MICRO_BATCH = 16  # train.micro_batch_size when not set


class TrainConfig(Section):
    """The RL loop: steps, batch shape, optimizer, evaluation and checkpoint cadence."""

    steps: int = Field(30, ge=0, description="RL steps (collect, score, update).")
    n_groups: int = Field(16, ge=1, description="Tasks (groups) per step.")
    max_sampling_tries: int = Field(
        3, ge=1, description="With algo dynamic_sampling: most collections per step."
    )
    group_size: int = Field(8, ge=1, description="Episodes sampled per task.")
    epochs: int = Field(1, ge=1, description="PPO epochs over each batch.")
    mini_batch_size: int | None = Field(
        None, ge=1, description="Trajectories per optimizer step (None: the step's "
        f"n_groups * group_size trajectories, at most {MINI_BATCH})."
    )
    micro_batch_size: int | None = Field(
        None, ge=1, description="Trajectories per forward pass (gradient accumulation; None: "
        f"mini_batch_size, at most {MICRO_BATCH})."
    )
    micro_batch_tokens: int | None = Field(
        None, ge=1, description="Token budget of a forward pass (rows x longest row), on top "
        "of micro_batch_size; None: rows only."
    )
    packing: bool = Field(
        False, description="Pack each forward pass's trajectories end to end into shared rows "
        "(position ids restart per trajectory, attention stays within it) instead of "
        "right-padding them; same log-probs, less padding."
    )
    share_prefix: bool = Field(
        True, description="In padded passes, encode the prompt the rows of a group share once "
        "and run each row's remainder on its KV cache (same log-probs and gradient, fewer "
        "tokens through the model); not used with packing."
    )
    lr: float = Field(5e-4, gt=0, description="AdamW learning rate of the policy.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient-norm clip.")
    eval_every: int = Field(0, ge=0, description="Evaluate every N steps; 0 = only at the end.")
    checkpoint_every: int = Field(
        10, ge=0, description="Checkpoint every N steps; 0 = only at the end."
    )
    keep_last: int = Field(3, ge=1, description="Checkpoints kept on disk (the newest ones).")
    save_samples: int = Field(
        16, ge=0, description="Trajectories saved to samples/ per step, as whole groups "
        "(rounded up to them; 0: none). turnrl show and turnrl report read them."
    )
    sample_which: Literal["first", "random", "best", "worst", "extremes"] = Field(
        "first", description="Which groups samples/ keeps: the first in the batch, random "
        "ones, the best or worst by mean return, or extremes (best, worst, next best, ...)."
    )
    norm_len: int | None = Field(
        None, ge=1, description="Constant length for seq_mean_token_sum_norm; None = max length."
    )
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: collect, then update; async: rollout workers keep sampling "
        "while the learner updates (needs distributed.backend=ray)."
    )
    max_staleness: int = Field(
        1, ge=0, description="async: most learner updates between a trajectory's oldest token "
        "and the update that trains on it; older ones are dropped (0 = synchronous)."
    )

    @model_validator(mode="after")
    def _check_batches(self) -> TrainConfig:
        per_step = self.n_groups * self.group_size
        if self.mini_batch_size is None:  # derived from the batch, so small runs just work
            self.mini_batch_size = min(MINI_BATCH, per_step)
        if self.micro_batch_size is None:
            self.micro_batch_size = min(MICRO_BATCH, self.mini_batch_size)
        if self.micro_batch_size > self.mini_batch_size:
            raise FieldError(
                "micro_batch_size",
                f"must be <= train.mini_batch_size ({self.mini_batch_size}), got "
                f"{self.micro_batch_size}; lower micro_batch_size or raise mini_batch_size",
                related=("mini_batch_size",),
            )
        if self.mini_batch_size > per_step:
            raise FieldError(
                "mini_batch_size",
                f"must be <= train.n_groups * train.group_size = {self.n_groups} * "
                f"{self.group_size} = {per_step} trajectories per step, got "
                f"{self.mini_batch_size}; lower mini_batch_size or raise n_groups/group_size",
                related=("n_groups", "group_size"),
            )
        return self


class EvalConfig(Section):
    """Held-out evaluation."""

    episodes: int = Field(256, ge=1, description="Held-out tasks (seeds) to evaluate.")
    samples_per_task: int = Field(1, ge=1, description="Episodes sampled per task.")
    pass_k: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [1], description="k values of pass@k; each <= samples_per_task."
    )
    temperature: float = Field(1.0, ge=0, description="Sampling temperature; 0 = greedy.")
    before_training: bool = Field(True, description="Also evaluate before the first step.")
    max_turns: int | None = Field(
        None, ge=1, description="Cap on agent turns per held-out episode (None: the env's own "
        "max_turns; the training cap rollout.max_turns does not apply here)."
    )

    @model_validator(mode="after")
    def _check_pass_k(self) -> EvalConfig:
        too_big = [k for k in self.pass_k if k > self.samples_per_task]
        if too_big:
            raise FieldError(
                "pass_k",
                f"pass@{too_big[0]} needs at least {too_big[0]} samples per task but "
                f"eval.samples_per_task is {self.samples_per_task}; raise "
                f"eval.samples_per_task to >= {max(too_big)} or drop {too_big} from eval.pass_k",
                related=("samples_per_task",),
            )
        return self


class Config(Section):
    """The whole run: every knob of `turnrl train`, with defaults, so ``Config()`` is valid."""

    run: RunConfig = Field(default_factory=RunConfig, description="Run identity and compute.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="The policy model.")
    env: EnvConfig = Field(default_factory=EnvConfig, description="The environment.")
    agent: AgentConfig = Field(default_factory=AgentConfig, description="An agent program "
                               "trained through the OpenAI-compatible endpoint (not an env).")
    multi: MultiConfig = Field(default_factory=MultiConfig, description="Multi-agent envs: "
                               "who plays each agent.")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="Sampling.")
    sft: SFTConfig = Field(default_factory=SFTConfig, description="Supervised warm-up.")
    reward: RewardConfig = Field(default_factory=RewardConfig, description="Extra rewards.")
    algo: AlgoConfig = Field(default_factory=AlgoConfig, description="The RL algorithm.")
    critic: CriticConfig = Field(default_factory=CriticConfig, description="The critic.")
    train: TrainConfig = Field(default_factory=TrainConfig, description="The RL loop.")
    eval: EvalConfig = Field(default_factory=EvalConfig, description="Held-out evaluation.")
    alarms: AlarmsConfig = Field(default_factory=AlarmsConfig, description="Collapse alarms.")
    distributed: DistributedConfig = Field(default_factory=DistributedConfig,
                                           description="Ray workers and data-parallel learners.")
    log: LogConfig = Field(default_factory=LogConfig, description="Metric sinks.")

    _origin: Origin = PrivateAttr(default_factory=Origin)

    def __eq__(self, other: object) -> bool:
        """Configs are equal when their values are; where they were loaded from does not count."""
        if not isinstance(other, Config):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in type(self).model_fields)

    def origin_of(self, key: str) -> str | None:
        """Where a dotted key was set: ``"configs/x.yaml:12"``, ``"override 'a.b=1'"`` or None.

        Lets later checks (env kwargs, registry names) point the user at the right line.
        """
        where, _ = self._origin.locate(key)
        return where
