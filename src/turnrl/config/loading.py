"""Reading a config: the YAML file with the line of every key, ``key.sub=value`` overrides
checked against the schema and merged over it with OmegaConf, validation into a
:class:`~turnrl.config.Config`; and writing one back (:func:`dump_config`, :func:`save_config`).
:func:`default_config_path` finds the config a command runs when given none.

Override values are typed by OmegaConf's YAML loader (``OmegaConf.from_dotlist``) and set
with ``OmegaConf.update``; an override replaces the value at its key (a mapping too), and
interpolations (``${...}``) are kept as text, never resolved.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal, TypeVar, cast, get_origin, overload

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ValidationError

from turnrl.config.errors import (
    ConfigError,
    ConfigIssue,
    Origin,
    issues_from,
    kind_of,
    unknown_key_message,
)
from turnrl.config.schema import Config
from turnrl.config.sections import Section, union_members
from turnrl.io import atomic_write_text

S = TypeVar("S", bound=Section)


def default_config_path(name: str = "default.yaml") -> Path:
    """``configs/<name>`` in the working directory, else the copy shipped in the package:
    ``default.yaml`` is what ``turnrl train`` (and a sweep's recipe without a config) runs,
    ``pretrain.yaml`` what ``turnrl pretrain`` runs."""
    local = Path("configs") / name
    if local.is_file():
        return local
    return Path(str(resources.files("turnrl") / "configs" / name))


# --------------------------------------------------------------------------------------
# YAML with line numbers
# --------------------------------------------------------------------------------------


def _key_lines(node: yaml.Node, prefix: str = "") -> Iterator[tuple[str, int, bool]]:
    """Yield ``(dotted key, 1-based line, is_duplicate)`` for every mapping key and list item."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            name = str(key_node.value)
            dotted = f"{prefix}{name}"
            yield dotted, key_node.start_mark.line + 1, name in seen
            seen.add(name)
            yield from _key_lines(value_node, dotted + ".")
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield f"{prefix}{index}", item.start_mark.line + 1, False
            yield from _key_lines(item, f"{prefix}{index}.")


def _read_text(path: Path, source: str) -> str:
    if not path.exists():
        raise ConfigError(
            f"{source}: config file not found; check the path (try configs/default.yaml)"
        )
    if not path.is_file():
        raise ConfigError(f"{source}: is not a file; pass a YAML config file")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read the file: {exc}") from None


def _read_yaml(path: Path, source: str, schema: type[BaseModel] = Config
               ) -> tuple[dict[str, Any], dict[str, int]]:
    """Read a YAML mapping and the line of each key; any problem is a ConfigError."""
    text = _read_text(path, source)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error_message(exc, source)) from None
    lines: dict[str, int] = {}
    issues = []
    for dotted, line, duplicate in _key_lines(node) if node is not None else ():
        if duplicate:
            message = f"{dotted}: duplicate key (first at line {lines[dotted]}); keep only one"
            issues.append(ConfigIssue(dotted, message, where=f"{source}:{line}", line=line))
        else:
            lines[dotted] = line
    if issues:
        raise ConfigError(issues)
    if data is None:
        return {}, lines
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}:1: the top level must be a mapping of sections "
            f"({', '.join(schema.model_fields)}), got {kind_of(data)}"
        )
    return data, lines


def _yaml_error_message(exc: yaml.YAMLError, source: str) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return f"{where}: invalid YAML: {detail}; fix the syntax at this line"


# --------------------------------------------------------------------------------------
# Overrides
# --------------------------------------------------------------------------------------

_FREE_FORM = object()  # marker: below a dict field (env.kwargs, ...), any sub-key is allowed
_SYNTAX = "expected key.sub=value, e.g. train.lr=1e-4"


def _resolve_key(dotted: str, schema: type[BaseModel] = Config) -> Any:
    """Check a dotted key against the schema; return its leaf annotation (or _FREE_FORM)."""
    current: Any = schema
    parts = dotted.split(".")
    for index, part in enumerate(parts):
        parent = ".".join(parts[:index])
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            raise ValueError(f"{parent!r} is a value, not a section; it has no key {part!r}")
        if part not in current.model_fields:
            raise ValueError(unknown_key_message(part, parent, list(current.model_fields)))
        current = current.model_fields[part].annotation
        if any(get_origin(member) is dict for member in union_members(current)):
            return _FREE_FORM
    return current


def _is_str_type(annotation: Any) -> bool:
    """str, a Literal of names, or ``str | None``: a value the user means as text."""
    return get_origin(annotation) is Literal or str in union_members(annotation)


def _parse_override(text: str, schema: type[BaseModel] = Config) -> tuple[str, Any]:
    """``(dotted key, value)`` of ``key.sub=value``, the key checked against the schema."""
    where = f"override {text!r}"
    dotted, raw = (part.strip() for part in text.partition("=")[::2])
    if "=" not in text or not all(dotted.split(".")):
        raise ConfigError([ConfigIssue(None, _SYNTAX, where)])
    try:
        leaf = _resolve_key(dotted, schema)
    except ValueError as exc:  # unknown key, or a key below a value
        raise ConfigError([ConfigIssue(dotted, str(exc), where)]) from None
    try:  # OmegaConf's YAML typing of the value (1e-4 is a float, [1,2] a list)
        # a DictConfig (what from_dotlist builds) always converts to a dict
        value = cast("dict[str, Any]", OmegaConf.to_container(
            OmegaConf.from_dotlist([f"value={raw}"])))["value"]
    except (yaml.YAMLError, OmegaConfBaseException) as exc:
        problem = getattr(exc, "problem", None) or _first_line(exc)
        message = f"{dotted}: cannot parse value {raw!r}: {problem}"
        raise ConfigError([ConfigIssue(dotted, message, where)]) from None
    if _is_str_type(leaf) and isinstance(value, (int, float, bool)):
        value = raw  # run.name=2024 means the string "2024"
    return dotted, value


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _kwargs_of_another_env(data: dict[str, Any], parsed: list[tuple[str, str, Any]]
                           ) -> list[tuple[str, str, Any]]:
    """``env.kwargs={}`` (and ``env.eval_kwargs={}``) first when the overrides switch ``env.id``
    away from the file's env without replacing them: a file's kwargs are its own env's
    constructor arguments (``turnrl train env.id=arithmetic-v0`` must not pass frozenlake's
    ``hole_prob``; with ``env.kwargs.max_value=3`` the kwargs are just that)."""
    found = data.get("env")
    env: dict[str, Any] = found if isinstance(found, dict) else {}
    ids = [value for _, dotted, value in parsed if dotted == "env.id"]
    if not ids or ids[-1] == env.get("id") or any(d == "env" for _, d, _ in parsed):
        return parsed
    switch = next(text for text, dotted, _ in reversed(parsed) if dotted == "env.id")
    resets: list[tuple[str, str, Any]] = [  # owned by the user's env.id override
        (switch, f"env.{key}", {}) for key in ("kwargs", "eval_kwargs")
        if env.get(key) and not any(d == f"env.{key}" for _, d, _ in parsed)]
    return [*resets, *parsed]


def _merge_overrides(data: dict[str, Any], overrides: Sequence[str], origin: Origin,
                     schema: type[BaseModel] = Config) -> dict[str, Any]:
    """The file's ``data`` with each override set at its key, later ones winning."""
    parsed = _kwargs_of_another_env(data, [(text, *_parse_override(text, schema))
                                           for text in overrides])
    if not parsed:
        return data  # the file's values as read, without a round trip through OmegaConf
    try:
        merged = OmegaConf.create(data, flags={"allow_objects": True})
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", None) or None  # a file value OmegaConf cannot hold
        where, line = origin.locate(key or "")
        problem = f"cannot merge the overrides over this value: {_first_line(exc)}"
        message = f"{key}: {problem}" if key else problem
        raise ConfigError([ConfigIssue(key, message, where, line)]) from None
    for text, dotted, value in parsed:
        try:
            OmegaConf.update(merged, dotted, value, merge=False)
        except (OmegaConfBaseException, ValueError, LookupError) as exc:
            message = f"{dotted}: cannot set this key: {_first_line(exc)}"
            raise ConfigError([ConfigIssue(dotted, message, f"override {text!r}")]) from None
        origin.set_by_override(dotted, text)
    # a DictConfig (what OmegaConf.create makes of a dict) always converts to a dict
    return cast("dict[str, Any]", OmegaConf.to_container(merged, resolve=False))


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


@overload
def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> Config: ...


@overload
def load_config(path: str | Path | None, overrides: Sequence[str] = (), *,
                schema: type[S]) -> S: ...


def load_config(path: str | Path | None, overrides: Sequence[str] = (), *,
                schema: type[Section] = Config) -> Section:
    """Read a YAML config (None = defaults only), apply ``key.sub=value`` overrides, validate.

    Override values are parsed as YAML: ``train.lr=1e-4``, ``log.wandb=false``,
    ``eval.pass_k=[1,2]``, ``env.kwargs.max_turns=12``. Later overrides win. ``schema``: the
    config tree (``Config`` for ``turnrl train``, ``PretrainConfig`` for ``turnrl pretrain``).
    Raises :class:`ConfigError` with file, line, key and fix for any mistake.
    """
    if isinstance(overrides, str):
        overrides = [overrides]
    if path is None:
        data: dict[str, Any] = {}
        origin = Origin()
    else:
        source = str(path)
        data, lines = _read_yaml(Path(path), source, schema)
        origin = Origin(source=source, lines=lines)
    data = _merge_overrides(data, overrides, origin, schema)
    try:
        cfg = schema.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(issues_from(exc, origin, schema)) from None
    cfg._origin = origin  # type: ignore[attr-defined]  # every config tree has one
    return cfg


def dump_config(cfg: Section) -> str:
    """YAML of the fully resolved config, keys in declaration order; load_config reads it back."""
    return yaml.safe_dump(
        cfg.model_dump(mode="json"), sort_keys=False, default_flow_style=False, allow_unicode=True
    )


def save_config(cfg: Section, path: str | Path) -> None:
    """Write :func:`dump_config` to ``path`` atomically (temp file in the same folder + rename)."""
    atomic_write_text(path, dump_config(cfg))
