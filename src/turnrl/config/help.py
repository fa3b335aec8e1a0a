"""`turnrl train --help`'s list of config keys: every key with its type, bounds, default and
description, rendered from the pydantic JSON schema of :class:`~turnrl.config.Config` (the
field descriptions and section docstrings are the documentation).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from pydantic import BaseModel

from turnrl.config.schema import Config
from turnrl.wording import show

_WIDTH = 100
_TYPES = {"integer": "int", "number": "float", "boolean": "bool", "string": "str",
          "object": "mapping", "array": "list", "null": "null"}
_BOUNDS = {"exclusiveMinimum": ">", "minimum": ">=", "exclusiveMaximum": "<", "maximum": "<="}


def _type_name(prop: Mapping[str, Any]) -> str:
    if "enum" in prop:
        return "|".join(str(choice) for choice in prop["enum"])
    if "anyOf" in prop:
        return " | ".join(_type_name(option) for option in prop["anyOf"])
    if "items" in prop:
        return f"list[{_type_name(prop['items'])}]"
    return _TYPES.get(prop.get("type", ""), "any")


def _bounds(prop: Mapping[str, Any]) -> str:
    """``", > 0 and <= 1"`` from the field's bounds (those of ``float | None`` too)."""
    options = [prop, *prop.get("anyOf", ())]
    parts = [f"{symbol} {show(option[name])}" for option in options
             for name, symbol in _BOUNDS.items() if name in option]
    return f", {' and '.join(parts)}" if parts else ""


def _yaml_inline(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("...").strip()


def _section_ref(prop: Mapping[str, Any]) -> str | None:
    """The $defs name of a section field (``$ref``, or ``allOf: [$ref]`` in older pydantic)."""
    ref = prop.get("$ref") or next((p["$ref"] for p in prop.get("allOf", ()) if "$ref" in p), None)
    return ref.rsplit("/", 1)[-1] if ref else None


def _help_lines(
    schema: Mapping[str, Any], defs: Mapping[str, Any], defaults: Mapping[str, Any], prefix: str
) -> Iterator[str]:
    for name, prop in schema["properties"].items():
        dotted = f"{prefix}{name}"
        if section := _section_ref(prop):
            yield ""
            yield f"{dotted}: {defs[section].get('description', '')}"
            yield from _help_lines(defs[section], defs, defaults[name], dotted + ".")
            continue
        yield f"  {dotted} ({_type_name(prop)}{_bounds(prop)}) = {_yaml_inline(defaults[name])}"
        yield textwrap.fill(prop.get("description", ""), _WIDTH, initial_indent=" " * 6,
                            subsequent_indent=" " * 6, break_on_hyphens=False)


def config_help(root: type[BaseModel] = Config) -> str:
    """Every config key of the tree ``root`` with its type, default and description (for
    ``turnrl train --help``; ``turnrl pretrain --help`` passes ``PretrainConfig``)."""
    schema = root.model_json_schema()
    defaults = root().model_dump(mode="json")  # default_factory values are not in the schema
    lines = _help_lines(schema, schema.get("$defs", {}), defaults, "")
    head = "Config keys (set them in the YAML file or as key.sub=value overrides):"
    return "\n".join([head, *lines]).rstrip() + "\n"
