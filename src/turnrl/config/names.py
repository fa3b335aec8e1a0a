"""Config values that name registered things (``algo.preset``, ``env.id``, ``algo.filters``,
...) checked against the registries' names: :func:`validate_names`, whose errors name the key,
where it was set, the closest valid name and every valid one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from turnrl.config.errors import ConfigError, ConfigIssue
from turnrl.config.schema import Config
from turnrl.wording import unknown_name_message

_NAME_KINDS = {
    "filters": "batch filter",
    "kl_mode": "KL placement",
    "is_correction": "behaviour correction",
    "id": "env",
    "loss_agg": "loss aggregation",
    "kl_estimator": "KL estimator",
    "policy_loss": "policy loss",
}


def validate_names(cfg: Config, choices: Mapping[str, Sequence[str]]) -> None:
    """Check names against registries: ``{"algo.preset": [...], "env.id": [...], ...}``.

    A value that is None (not set) is skipped; each name of a list is checked. Raises
    :class:`ConfigError` naming the key, where it was set, the closest valid name and all
    valid names.
    """
    issues = []
    for key, valid in choices.items():
        value: Any = cfg
        for part in key.split("."):
            if not isinstance(value, BaseModel) or part not in type(value).model_fields:
                raise ValueError(f"validate_names: {key!r} is not a config key")
            value = getattr(value, part)
        name = key.rsplit(".", 1)[-1]
        kind = _NAME_KINDS.get(name, name.replace("_", " "))
        for item in value if isinstance(value, list) else [value]:  # a name, or a list of them
            if item is None or item in valid:
                continue
            where, line = cfg._origin.locate(key)
            message = f"{key}: {unknown_name_message(kind, str(item), sorted(valid))}"
            issues.append(ConfigIssue(key=key, message=message, where=where, line=line))
    if issues:
        raise ConfigError(issues)
