"""The ``algo`` section, generated from :class:`~turnrl.algos.presets.AlgoPreset`.

``AlgoPreset`` is the one schema of an algorithm. This section is a preset name plus one
optional override per preset field (``None``: the preset's value), with the field's type,
documentation and bounds taken from the preset's field metadata, so a new preset field is
a new config key with nothing else to write. :meth:`AlgoConfig.resolve` gives the preset
with the overrides applied.

Renamed keys keep working with a deprecation line: ``algo.dynamic_sampling=true`` is
``algo.filters=[dynamic_sampling]``, ``algo.mask_truncated=true`` adds the ``truncated``
filter.
"""

from __future__ import annotations

import dataclasses
import logging
import types
import typing
from typing import TYPE_CHECKING, Any

from pydantic import Field, create_model, model_validator

from turnrl.algos.presets import PRESETS, AlgoPreset
from turnrl.config.sections import Section

log = logging.getLogger("turnrl")

# deprecated boolean key -> the filter it adds (or removes when false)
DEPRECATED_FILTER_KEYS = {"dynamic_sampling": "dynamic_sampling", "mask_truncated": "truncated"}


class _AlgoBase(Section):
    """The RL algorithm: a named preset plus optional per-axis overrides (None = preset's)."""

    preset: str = Field("grpo", description="Named bundle of the keys below (grpo, ppo, ...).")

    @model_validator(mode="after")
    def _say_deprecated(self) -> _AlgoBase:
        for key, name in DEPRECATED_FILTER_KEYS.items():
            if getattr(self, key) is not None:
                log.warning("algo.%s is deprecated: use algo.filters (e.g. algo.filters=[%s]); "
                            "it still works", key, name)
        return self

    def resolve(self) -> AlgoPreset:
        """The preset named by ``preset`` with every key this section sets overridden."""
        overrides = {f.name: getattr(self, f.name) for f in preset_fields()
                     if getattr(self, f.name) is not None}
        preset = dataclasses.replace(PRESETS[self.preset], **overrides)
        filters = list(preset.filters)
        for key, name in DEPRECATED_FILTER_KEYS.items():
            value = getattr(self, key)
            if value and name not in filters:
                filters.append(name)
            elif value is False and name in filters:
                filters.remove(name)
        return dataclasses.replace(preset, filters=tuple(filters))


def preset_fields() -> list[dataclasses.Field]:
    """The preset fields that are config keys (not ``paper``/``description``)."""
    return [f for f in dataclasses.fields(AlgoPreset) if not f.metadata.get("preset_only")]


def _override(f: dataclasses.Field, annotation: Any) -> tuple[Any, Any]:
    """``(type | None, Field(None, ...))`` for one preset field."""
    bounds = {k: f.metadata[k] for k in ("ge", "gt") if k in f.metadata}
    if typing.get_origin(annotation) is tuple:  # YAML and overrides write lists
        annotation = types.GenericAlias(list, typing.get_args(annotation)[0])  # list[item]
    return annotation | None, Field(None, description=f.metadata["doc"], **bounds)


_HINTS = typing.get_type_hints(AlgoPreset)

if TYPE_CHECKING:
    # What type checkers read. The class below is a subclass of _AlgoBase built at run time;
    # its generated fields (one optional override per preset key) are invisible to a static
    # checker, so none is declared here: typed code reads ``preset`` and the overrides
    # through ``resolve() -> AlgoPreset``, never ``cfg.algo.<key>``.
    class AlgoConfig(_AlgoBase):
        """The RL algorithm: a named preset plus optional per-axis overrides."""

else:
    AlgoConfig = create_model(
        "AlgoConfig", __base__=_AlgoBase, __module__=__name__,
        **{f.name: _override(f, _HINTS[f.name]) for f in preset_fields()},
        **{key: (bool | None, Field(None, description=f"Deprecated: use algo.filters=[{name}]."))
           for key, name in DEPRECATED_FILTER_KEYS.items()})
    AlgoConfig.__doc__ = _AlgoBase.__doc__
