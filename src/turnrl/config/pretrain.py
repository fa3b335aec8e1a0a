"""The config tree of ``turnrl pretrain``: run, model shape, corpus, optimisation, probes.

Loaded like the training config (``load_config(path, overrides, schema=PretrainConfig)``:
YAML, dotted overrides, the same clear errors); ``turnrl pretrain --help`` lists every key.
The shipped base model's recipe is ``configs/pretrain.yaml``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr

from turnrl.config.errors import Origin
from turnrl.config.sections import RunConfig, Section, TinyConfig


class PretrainRunConfig(RunConfig):
    """Run identity, output folder, seeding and compute placement."""

    name: str = Field("pretrain", description="Run name; outputs go to <out_dir>/<name>/. A "
                      "name, not a path: no '/', not empty, not starting with '.'.")


class CorpusConfig(Section):
    """The procedurally generated corpus (docs/pretraining.md: what each skill teaches)."""

    seed: int = Field(0, ge=0, description="Seed of the corpus: conversation i is drawn from "
                      "(seed, i) alone.")
    seq_len: int = Field(1280, ge=64, description="Tokens per packed row; the longest "
                         "distance a skill spreads its context over (<= the model's positions).")
    short_seq_len: int = Field(
        256, ge=64, description="Tokens per row during the first short_steps steps (a "
        "curriculum: short contexts, many more conversations per token, while copying "
        "forms); the batch then has seq_len / short_seq_len times the rows.")
    short_steps: int = Field(0, ge=0, description="Steps with short rows (0: none).")
    short_shares: dict[str, float] | None = Field(
        None, description="The mixture during the short_steps (None: shares). Copying forms "
        "several times sooner on echo (repeat a whole text) than inside the full mixture.")
    context_weight: float = Field(
        0.0, ge=0, le=1, description="Loss weight of the context tokens (system, user and "
        "tool turns) relative to the assistant turns' 1: above 0, the model also learns to "
        "predict what it reads (repeated names and keys reward attending back).")
    shares: dict[str, float] = Field(
        default_factory=lambda: {
            "copy": 0.22, "echo": 0.08, "induction": 0.10, "lookup": 0.12, "choose": 0.08,
            "tool_call": 0.20, "memory": 0.08, "arithmetic": 0.06, "count_compare": 0.06},
        description="Weight of each skill in the mixture (normalised): copy, echo, "
        "induction, lookup, choose, tool_call, memory, arithmetic, count_compare.")


class OptimConfig(Section):
    """AdamW with linear warm-up and cosine decay; the loss is the mean negative
    log-likelihood of the assistant tokens of a batch."""

    steps: int = Field(3000, ge=1, description="Optimizer steps.")
    batch_size: int = Field(8, ge=1, description="Packed rows per step.")
    lr: float = Field(3e-3, gt=0, description="Peak learning rate.")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="Final learning rate as a "
                                "fraction of the peak (end of the cosine).")
    warmup_steps: int = Field(100, ge=0, description="Linear warm-up steps from 0.")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay (matrices only).")
    betas: tuple[float, float] = Field((0.9, 0.98), description="AdamW betas.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")


class PretrainCheckpointConfig(Section):
    """Checkpoints of the pretraining run (``checkpoints/step_<n>/``, written atomically)."""

    every: int = Field(250, ge=1, description="Save a checkpoint every this many steps.")
    keep_last: int = Field(2, ge=1, description="Checkpoints kept (older ones are deleted).")


class ProbeConfig(Section):
    """Held-out probes, run at the end (``turnrl probe`` runs them on any model)."""

    examples: int = Field(128, ge=1, description="Examples per probe.")
    every: int = Field(0, ge=0, description="Also probe every this many steps (0: only at "
                       "the end).")


class PretrainDistributedConfig(Section):
    """Data-parallel pretraining (docs/pretraining.md)."""

    backend: Literal["none", "ray"] = Field(
        "none", description="none: one process, or torchrun's processes when launched under "
        "torchrun; ray: num_learners processes as Ray actors.")
    num_learners: int = Field(1, ge=1, description="Data-parallel processes with backend=ray.")
    ray_address: str | None = Field(None, description="Ray cluster to join; None starts a "
                                    "local one.")


class PretrainLogConfig(Section):
    """Where metrics go (metrics.jsonl is always written)."""

    tensorboard: bool = Field(True, description="Write TensorBoard events.")
    progress: bool = Field(True, description="Show a progress bar on the terminal.")


class PretrainConfig(Section):
    """Every knob of `turnrl pretrain`, with defaults (the shipped base's recipe)."""

    run: PretrainRunConfig = Field(default_factory=PretrainRunConfig,
                                   description="Run identity and compute.")
    model: TinyConfig = Field(default_factory=TinyConfig, description="The model's shape "
                              "and the seed of its random initialisation.")
    corpus: CorpusConfig = Field(default_factory=CorpusConfig, description="The corpus.")
    optim: OptimConfig = Field(default_factory=OptimConfig, description="Optimisation.")
    checkpoint: PretrainCheckpointConfig = Field(default_factory=PretrainCheckpointConfig,
                                                 description="Checkpoints.")
    probe: ProbeConfig = Field(default_factory=ProbeConfig, description="Probes.")
    distributed: PretrainDistributedConfig = Field(
        default_factory=PretrainDistributedConfig, description="Data parallelism.")
    log: PretrainLogConfig = Field(default_factory=PretrainLogConfig,
                                   description="Metric sinks.")

    _origin: Origin = PrivateAttr(default_factory=Origin)

    def origin_of(self, key: str) -> str | None:
        """Where a dotted key was set (a file and line, or an override), if known."""
        where, _ = self._origin.locate(key)
        return where
