"""The config's user-facing errors: :class:`ConfigError`, where each value came from, and the
rewording of pydantic's validation errors into one line per problem with its file:line or
override, e.g. ``configs/x.yaml:12: train.group_size: must be >= 1, got 0``.

The wording comes from pydantic's own error fields (``ctx`` for bounds and choices, ``msg``
for the expected type); only the few nouns that mean nothing to a YAML user are reworded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from turnrl.wording import did_you_mean, kind_of, show

# pydantic's bound names (the Field arguments, also the keys of an error's ctx) -> symbols
BOUND_SYMBOLS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config: the dotted key, where it was set, and what is wrong."""

    key: str | None  # dotted key, e.g. "train.group_size"; None for file-level problems
    message: str  # what is wrong and how to fix it, without the location
    where: str | None = None  # "configs/x.yaml:12", "configs/x.yaml", "override 'a.b=1'"
    line: int | None = None  # 1-based line in the YAML file, when known

    def __str__(self) -> str:
        head = f"{self.where}: " if self.where else ""
        return head + self.message


class ConfigError(ValueError):
    """A user's mistake in a config file or an override; the message is meant to be shown as is.

    ``issues`` lists every problem found (all are reported at once, one per line).
    """

    def __init__(self, message: str | Sequence[ConfigIssue]) -> None:
        if isinstance(message, str):
            self.issues: list[ConfigIssue] = [ConfigIssue(key=None, message=message)]
        else:
            self.issues = list(message)
        super().__init__("\n".join(str(issue) for issue in self.issues))


class FieldError(ValueError):
    """Raised by cross-field validators to blame one field (``related`` may be blamed too)."""

    def __init__(self, field_name: str, message: str, related: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.field_name = field_name
        self.related = tuple(related)


@dataclass(frozen=True)
class Origin:
    """Where each value of a loaded config came from, for error messages."""

    source: str | None = None  # the YAML file, as the user named it
    lines: dict[str, int] = field(default_factory=dict)  # dotted key -> 1-based line
    overrides: dict[str, str] = field(default_factory=dict)  # dotted key -> "key=value"

    def locate(self, key: str, related: Sequence[str] = ()) -> tuple[str | None, int | None]:
        """``(where, line)`` of ``key``: an override of it, of a related key or of a parent
        (what the user typed comes first: ``train.n_groups=2`` is named rather than the
        config file's ``mini_batch_size`` line it conflicts with), else the first of them
        with a line in the file."""
        parts = key.split(".")
        parents = [".".join(parts[:end]) for end in range(len(parts) - 1, 0, -1)]
        candidates = (key, *related, *parents)
        for candidate in candidates:
            if candidate in self.overrides:
                return f"override {self.overrides[candidate]!r}", None
        for candidate in candidates:
            if candidate in self.lines:
                line = self.lines[candidate]
                return (f"{self.source}:{line}" if self.source else None), line
        return self.source, None

    def set_by_override(self, dotted: str, text: str) -> None:
        """The override ``text`` now owns ``dotted`` and everything below it."""
        below = dotted + "."
        for key in [k for k in self.lines if k == dotted or k.startswith(below)]:
            del self.lines[key]
        for key in [k for k in self.overrides if k.startswith(below)]:
            del self.overrides[key]
        self.overrides[dotted] = text


# --------------------------------------------------------------------------------------
# Wording shared by the checks
# --------------------------------------------------------------------------------------


def dotted(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc)


def unknown_key_message(name: str, parent: str, valid: Sequence[str]) -> str:
    hint = did_you_mean(name, valid, otherwise=".")
    where = f"in {parent!r}" if parent else "at top level"
    return f"unknown key {name!r} {where}{hint} Valid keys: {', '.join(sorted(valid))}"


def choice_message(value: Any, choices: Sequence[str]) -> str:
    hint = did_you_mean(str(value), choices, otherwise=".")
    return f"unknown value {show(value)}{hint} Valid choices: {', '.join(choices)}"


# --------------------------------------------------------------------------------------
# Pydantic errors -> ConfigIssues
# --------------------------------------------------------------------------------------

# The only rewording kept: pydantic's nouns (from "Input should be a valid <noun>") that a
# YAML user would not know what to write for.
_NOUNS = {"boolean": "true or false", "dictionary": "a mapping (key: value lines)"}
_SECTION = "a mapping (a section of key: value lines)"  # a model_type error (ctx class_name)
_EXPECTED_TYPE = re.compile(r"Input should be a valid (\w+)")


def _expected(error: Mapping[str, Any]) -> str | None:
    """``"an integer"`` for "Input should be a valid integer, ..."; None for other errors."""
    match = _EXPECTED_TYPE.match(error["msg"])
    if match is None:
        return None
    if "class_name" in (error.get("ctx") or {}):
        return _SECTION
    noun = match.group(1)
    return _NOUNS.get(noun, ("an " if noun[0] in "aeiou" else "a ") + noun)


def _section_at(root: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel]:
    for part in loc:
        section = root.model_fields[str(part)].annotation
        # ``loc`` is the parent of an unknown key: every step on the way is a nested section
        assert isinstance(section, type) and issubclass(section, BaseModel), loc
        root = section
    return root


def _describe(
    error: Mapping[str, Any], root: type[BaseModel]
) -> tuple[tuple[Any, ...], str, tuple[str, ...]]:
    """``(loc, message, related keys)`` of one pydantic error, in the user's words."""
    loc = tuple(error["loc"])
    value = error.get("input")
    ctx = error.get("ctx") or {}
    if error["type"] == "extra_forbidden":
        parent = loc[:-1]
        valid = list(_section_at(root, parent).model_fields)
        return loc, unknown_key_message(str(loc[-1]), dotted(parent), valid), ()
    if isinstance(ctx.get("error"), FieldError):
        exc = ctx["error"]
        return (*loc, exc.field_name), str(exc), tuple(dotted((*loc, n)) for n in exc.related)
    if "error" in ctx:  # a ValueError raised by a validator
        return loc, str(ctx["error"]), ()
    if bound := next((name for name in BOUND_SYMBOLS if name in ctx), None):
        return loc, f"must be {BOUND_SYMBOLS[bound]} {show(ctx[bound])}, got {show(value)}", ()
    if error["type"] == "literal_error":
        return loc, choice_message(value, re.findall(r"'([^']*)'", ctx["expected"])), ()
    if expected := _expected(error):
        message = f"expected {expected}, got {show(value)} ({kind_of(value)})"
        if expected == "a string" and isinstance(value, (int, float, bool)):
            message += f"; quote it: '{value}'"
        return loc, message, ()
    return loc, f"{error['msg']}, got {show(value)}", ()


def issues_from(
    exc: ValidationError, origin: Origin, root: type[BaseModel]
) -> list[ConfigIssue]:
    """One :class:`ConfigIssue` per error of validating ``root``, in file order."""
    issues = []
    for error in exc.errors():
        loc, message, related = _describe(error, root)
        key = dotted(loc)
        where, line = origin.locate(key, related)
        if error["type"] != "extra_forbidden":
            message = f"{key}: {message}"
        issues.append(ConfigIssue(key=key, message=message, where=where, line=line))
    # In file order; overrides and keys without a line come last.
    return sorted(issues, key=lambda issue: (issue.line is None, issue.line or 0))
