"""The typed config tree: YAML loading, dotted overrides, validation with clear errors.

One pydantic model per section, one documented field per knob; the field descriptions are
the documentation (`turnrl train --help` prints them through :func:`config_help`).

>>> cfg = load_config(None, ["train.steps=3", "eval.pass_k=[1]"])
>>> cfg.train.steps, cfg.algo.preset
(3, 'grpo')

A user's mistake raises :class:`ConfigError`, whose message says what is wrong, where
(file, line, dotted key or the override) and how to fix it, e.g.
``configs/x.yaml:12: train.group_size: must be >= 1, got 0``.

Modules: :mod:`~turnrl.config.sections` and :mod:`~turnrl.config.schema` (the models),
:mod:`~turnrl.config.loading` (YAML with line numbers, OmegaConf override merge, dump),
:mod:`~turnrl.config.errors` (the error wording and locations), :mod:`~turnrl.config.names`
(registry names in a config), :mod:`~turnrl.config.help`.
"""

from turnrl.config.errors import ConfigError, ConfigIssue
from turnrl.config.help import config_help
from turnrl.config.loading import default_config_path, dump_config, load_config, save_config
from turnrl.config.names import validate_names
from turnrl.config.pretrain import PretrainConfig
from turnrl.config.schema import (
    AlgoConfig,
    Config,
    CriticConfig,
    EvalConfig,
    RewardConfig,
    SFTConfig,
    TrainConfig,
)
from turnrl.config.sections import (
    AgentConfig,
    AlarmsConfig,
    DistributedConfig,
    EnvConfig,
    LatencyConfig,
    LogConfig,
    LoraConfig,
    ModelConfig,
    RolloutConfig,
    RunConfig,
    TinyConfig,
)

__all__ = [
    "AgentConfig",
    "AlarmsConfig",
    "AlgoConfig",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "CriticConfig",
    "DistributedConfig",
    "EnvConfig",
    "EvalConfig",
    "LatencyConfig",
    "LogConfig",
    "LoraConfig",
    "ModelConfig",
    "PretrainConfig",
    "RewardConfig",
    "RolloutConfig",
    "RunConfig",
    "SFTConfig",
    "TinyConfig",
    "TrainConfig",
    "config_help",
    "default_config_path",
    "dump_config",
    "load_config",
    "save_config",
    "validate_names",
]
