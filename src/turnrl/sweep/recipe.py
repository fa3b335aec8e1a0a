"""A sweep recipe (``recipes/<name>.yaml``): a base config, overrides for every run, a grid
of config values and named arms, and the seeds; expanded into the runs of the sweep.

    name: turn_credit                # default: the file's stem
    claim: "turn-level credit beats trajectory-level on long horizons"
    source: "Wang et al. 2025 (RAGEN); Feng et al. 2025 (GiGPO)"
    config: ../configs/default.yaml  # relative to this file (or the working directory)
    seeds: 5                         # 5 = [0, 1, 2, 3, 4]; or a list
    overrides: [train.steps=30]      # every run
    arms:                            # named sets of overrides (optional)
      sparse: []
      dense: [env.kwargs.progress_reward=0.1]
    grid:                            # a config key -> its values (cartesian product)
      algo.preset: [grpo, rloo, ppo]
    share_sft: true                  # runs that differ only after SFT share its start
    metric: success                  # the held-out score the table compares
    target: 0.5                      # optional: samples and seconds to this training success
    curve_x: step                    # the plot's x axis: step | time | episodes
    jobs: 2                          # most runs at once (turnrl sweep --jobs overrides)

A *cell* is one arm with one value of every grid key (``dense preset=rloo``); each cell runs
once per seed. The overrides of a run are, in order: the recipe's ``overrides``, the
command line's, the arm's, the grid's, then ``run.seed``. Runs whose resolved configs agree
on everything SFT and the evaluation before RL read (:data:`SFT_SECTIONS` but for
:data:`RL_ONLY_ROLLOUT`, and ``run.seed``) share one SFT start when ``share_sft`` is on.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from turnrl.config import ConfigError, default_config_path, load_config
from turnrl.models.base import BUILTIN, shipped_base_digest

__all__ = ["Cell", "PlannedRun", "Recipe", "RecipeError", "load_recipe", "plan_runs"]

# the config sections SFT and the evaluation before RL read (with run.seed)
SFT_SECTIONS = ("model", "env", "agent", "sft", "rollout", "eval", "reward", "multi")
RL_ONLY_ROLLOUT = ("temperature", "max_turns")
RL_ONLY_MULTI = ("seatings",)  # the seatings of RL's task groups (SFT follows multi.agents)
# Config fields added after the first sweep records were committed, with their defaults.
# The keys leave a field out while it is at its default, so a new field does not change
# the key of any config that does not use it: records and SFT starts made before it keep
# their keys. A field added to the schema joins this table (tests pin the keys).
LATER_FIELDS: dict[str, Any] = {
    "sft.stop_loss": None,
    # the multi section (multi-agent envs); a section left empty is left out too
    "multi.agents": {}, "multi.seatings": [], "multi.role_groups": True, "multi.step_keys": "auto",
    "multi.eval_opponents": ["random", "oracle", "self"], "multi.pool_every": 5,
    "multi.pool_size": 4, "multi.policies": [], "multi.frozen_models": {},
    "agent.train_partial": False,
}


class RecipeError(ValueError):
    """A mistake in a sweep recipe; the message names the file and key and says the fix."""


class Recipe(BaseModel):
    """A sweep recipe, validated (see the module docstring for the file format)."""

    model_config = ConfigDict(extra="forbid")

    name: str = ""
    claim: str = ""
    source: str = ""
    config: str | None = Field(None, description="the base config (default: the default job's)")
    seeds: int | list[int] = Field(5, description="a count (0..n-1) or the list of seeds")
    overrides: list[str] = Field(default_factory=list)
    arms: dict[str, list[str]] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    share_sft: bool = True
    metric: str = "success"
    target: float | None = Field(None, description="a training success to time (samples, "
                                 "seconds to reach it)")
    curve_x: Literal["step", "time", "episodes"] = "step"
    jobs: int = Field(1, ge=1)
    results: str | None = Field(None, description="where run records and the table go "
                                "(relative to this file); default the sweep's directory")
    path: Path = Field(Path("recipe.yaml"), exclude=True)

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: int | list[int]) -> int | list[int]:
        if isinstance(value, int) and value < 1:
            raise ValueError(f"must be a positive count or a list of seeds, got {value}")
        if isinstance(value, list) and (not value or len(set(value)) != len(value)):
            raise ValueError(f"must list distinct seeds, got {value}")
        return value

    @field_validator("overrides")
    @classmethod
    def _overrides(cls, value: list[str]) -> list[str]:
        return _checked_overrides(value, "")

    @field_validator("arms")
    @classmethod
    def _arms(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for arm, overrides in value.items():
            _checked_overrides(overrides, f"arm {arm!r}: ")
        return value

    @field_validator("grid")
    @classmethod
    def _grid(cls, value: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in value.items():
            if not values:
                raise ValueError(f"{key}: give at least one value")
            if "=" in key or "." not in key:
                raise ValueError(f"{key!r} is not a config key such as algo.preset")
        return value

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

    def config_path(self) -> Path | None:
        """The base config, relative to the recipe file, else to the working directory."""
        if self.config is None:
            return None
        for candidate in (self.path.parent / self.config, Path(self.config)):
            if candidate.is_file():
                return candidate
        raise RecipeError(f"{self.path}: config: {self.config!r} is neither at "
                          f"{self.path.parent / self.config} nor at {Path(self.config)}; give "
                          "a path relative to the recipe file")


    def describe(self) -> list[str]:
        """The markdown lines above a results table: the claim, its source, the setup."""
        lines = [f"# {self.name}", ""]
        if self.claim:
            lines.append(f"**Claim:** {self.claim}")
        if self.source:
            lines.append(f"**Source:** {self.source}")
        grid = "; ".join(f"`{k}` ∈ {{{', '.join(map(_value_text, v))}}}"
                         for k, v in self.grid.items())
        arms = "; ".join(f"{name}: `{' '.join(o) or '(base)'}`" for name, o in self.arms.items())
        lines += ["", f"**Setup:** `turnrl sweep {self.path}`: base config "
                  f"`{self.config or 'configs/default.yaml'}` with "
                  f"`{' '.join(self.overrides) or '(no overrides)'}`"
                  + (f"; arms {arms}" if arms else "") + (f"; grid {grid}" if grid else "")
                  + f"; seeds {self.seed_list}"
                  + ("; runs that differ only after SFT share its start" if self.share_sft
                     else "") + "."]
        return lines


def _checked_overrides(overrides: list[str], where: str) -> list[str]:
    for item in overrides:
        if "=" not in item or item.startswith("="):
            raise ValueError(f"{where}{item!r} is not a key=value override, e.g. train.steps=30")
        if item.split("=", 1)[0] == "run.seed":
            raise ValueError(f"{where}run.seed is set by the sweep; list the seeds under seeds:")
    return overrides


def load_recipe(path: str | Path) -> Recipe:
    """Read and validate a recipe; every mistake is a :class:`RecipeError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: no such recipe file; recipes/ has the shipped ones")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise RecipeError(f"{path}: not valid YAML ({error})") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a YAML mapping (config, seeds, grid, ...)")
    try:
        recipe = Recipe.model_validate({**data, "path": path})
    except ValidationError as error:
        problems = [f"{path}: {'.'.join(str(p) for p in e['loc']) or 'recipe'}: "
                    f"{e['msg'].removeprefix('Value error, ')}" for e in error.errors()]
        hint = (" (the keys are name, claim, source, config, seeds, overrides, arms, grid, "
                "share_sft, metric, target, curve_x, jobs, results)")
        raise RecipeError("\n".join(problems) + hint) from None
    if not recipe.name:
        recipe.name = path.stem
    if not re.fullmatch(r"[A-Za-z0-9._-]+", recipe.name):
        raise RecipeError(f"{path}: name: {recipe.name!r} names a directory; use letters, "
                          "digits, '.', '_' and '-'")
    recipe.config_path()  # a missing base config is an error now, before any run
    return recipe


@dataclass(frozen=True)
class Cell:
    """One arm with one value of each grid key: its name and its overrides."""

    name: str
    overrides: tuple[str, ...]

    @property
    def slug(self) -> str:
        """The name as a file name."""
        return re.sub(r"[^A-Za-z0-9._=-]+", "_", self.name).strip("_") or "base"


@dataclass(frozen=True)
class PlannedRun:
    """One run of the sweep: its cell, seed, full override list and SFT-sharing key."""

    cell: Cell
    seed: int
    overrides: tuple[str, ...]
    sft_key: str | None  # runs with the same key share one SFT start; None: no sharing
    config_key: str = ""  # the whole resolved config, hashed (config_key())

    @property
    def name(self) -> str:
        return f"{self.cell.slug}-s{self.seed}"


def _value_text(value: Any) -> str:
    """A grid value as the text of an override (YAML reads JSON)."""
    return value if isinstance(value, str) else json.dumps(value)


def _short_names(keys: list[str]) -> dict[str, str]:
    """The last part of each key (``algo.preset`` → ``preset``), or the whole key where two
    keys end alike."""
    tails = [key.rsplit(".", 1)[-1] for key in keys]
    return {key: tail if tails.count(tail) == 1 else key
            for key, tail in zip(keys, tails, strict=True)}


def cells(recipe: Recipe) -> list[Cell]:
    """The recipe's cells: arms × grid values, in file order."""
    keys = list(recipe.grid)
    short = _short_names(keys)
    arms = list(recipe.arms.items()) or [("", [])]
    out = []
    for arm, arm_overrides in arms:
        for values in itertools.product(*(recipe.grid[key] for key in keys)):
            chosen = list(zip(keys, values, strict=True))
            parts = [arm] if arm else []
            parts += [f"{short[key]}={_value_text(value)}" for key, value in chosen]
            grid_overrides = [f"{key}={_value_text(value)}" for key, value in chosen]
            out.append(Cell(" ".join(parts) or "base", (*arm_overrides, *grid_overrides)))
    return out


def _digest(value: Any) -> str:
    """A short, stable hash of a JSON-able value (keys sorted)."""
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _without_later_defaults(resolved: dict[str, Any]) -> dict[str, Any]:
    """``resolved`` less the :data:`LATER_FIELDS` that are at their defaults (the sections
    they are in are copied; ``resolved`` is not changed)."""
    out = dict(resolved)
    for dotted, default in LATER_FIELDS.items():
        *parents, name = dotted.split(".")
        node = out
        for part in parents:
            if not isinstance(node.get(part), dict):
                break
            node[part] = dict(node[part])
            node = node[part]
        else:
            if name in node and node[name] == default:
                del node[name]
                if not node and len(parents) == 1:  # the whole section was later
                    del out[parents[0]]
    return out


def _keyed_model(resolved: dict[str, Any]) -> dict[str, Any]:
    """``resolved`` with ``model.path`` as the keys name it. ``tiny`` meant the random init
    until the pretrained base shipped (issue 40): records and SFT starts made then keep their
    keys as ``tiny-random``'s, and ``tiny`` (the base) is keyed by its weights, so that a
    record of the random init is never taken for a run of the base."""
    path = resolved["model"]["path"]
    if path not in BUILTIN:
        return resolved
    keyed = "tiny" if path == "tiny-random" else f"tiny-base:{shipped_base_digest()}"
    return {**resolved, "model": {**resolved["model"], "path": keyed}}


def sft_key(resolved: dict[str, Any]) -> str | None:
    """What SFT and the first evaluation depend on, hashed; None when SFT is off."""
    if not resolved["sft"]["enabled"]:
        return None
    resolved = _keyed_model(_without_later_defaults(resolved))
    part = {section: resolved[section] for section in SFT_SECTIONS if section in resolved}
    # read by RL's sampling only (the evaluation has its own temperature and turn cap)
    part["rollout"] = {k: v for k, v in part["rollout"].items() if k not in RL_ONLY_ROLLOUT}
    multi = {k: v for k, v in part.pop("multi", {}).items() if k not in RL_ONLY_MULTI}
    if multi:
        part["multi"] = multi
    part["seed"] = resolved["run"]["seed"]
    part["device"] = resolved["run"]["device"]
    return _digest(part)


def config_key(resolved: dict[str, Any]) -> str:
    """The run's whole resolved config, hashed, less what does not change its results
    (``run.name``, ``run.out_dir``, ``run.threads``): a record made from another base config
    (the recipe's ``config`` file edited since) has another key."""
    resolved = _keyed_model(_without_later_defaults(resolved))
    run = {k: v for k, v in resolved["run"].items() if k not in ("name", "out_dir", "threads")}
    return _digest({**resolved, "run": run})


def plan_runs(recipe: Recipe, extra: Sequence[str] = ()) -> list[PlannedRun]:
    """Every run of the recipe (cells × seeds), each config loaded and validated now, so a
    bad override fails before anything runs."""
    base = recipe.config_path() or default_config_path()
    runs = []
    for cell in cells(recipe):
        for seed in recipe.seed_list:
            overrides = (*recipe.overrides, *extra, *cell.overrides, f"run.seed={seed}")
            try:
                resolved = load_config(base, list(overrides)).model_dump()
            except ConfigError as error:
                raise RecipeError(f"{recipe.path}: cell {cell.name!r}, seed {seed}: {error}"
                                  ) from None
            key = sft_key(resolved) if recipe.share_sft else None
            runs.append(PlannedRun(cell, seed, overrides, key, config_key(resolved)))
    names = [run.name for run in runs]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise RecipeError(f"{recipe.path}: cells share the directory name {clash[0]!r}; rename "
                          "an arm or a value")
    return runs
