"""Checkpoints: a Hugging Face model dir plus optimizer, RNG and step, written atomically.

Layout of ``checkpoints/step_<n>/``: the policy (``save_pretrained``; LoRA adapters for peft
models), the tokenizer, ``critic/`` when a critic exists, ``optimizer.pt`` and ``state.json``
(step, RNG states); a run with separate policies (``multi.policies``) also has
``policies/<name>/`` for each (its weights, and its critic), their optimizers in
``optimizer.pt`` as ``policy/<name>`` and ``critic/<name>``. It is written to a temporary
sibling and renamed into place, so a crash never leaves a half checkpoint under the final
name (nor does a full disk: the temporary directory is removed and the error names what was
written, :mod:`turnrl.io`).

Before a resume touches anything, :func:`resume_checkpoint` checks the checkpoint it would
continue from: every file it needs is there and loads (:func:`checkpoint_problem`); a
corrupt one is refused with a :class:`CheckpointError` that offers the newest sound
earlier checkpoint (``--resume-from step_<n>``).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from torch import nn
from transformers import PreTrainedTokenizerBase

from turnrl.io import atomic_write_text, dir_size, run_write

POLICIES = "policies"  # the separate policies' folder in a checkpoint (and an SFT model dir)
STEP_DIR = re.compile(r"^step_(\d+)$")
# a model dir holds one of these (a full model, LoRA adapters, sharded, or the old format)
WEIGHTS = ("model.safetensors", "adapter_model.safetensors", "model.safetensors.index.json",
           "pytorch_model.bin")


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from (a file missing or not loading), or a
    ``--resume-from`` that names none; says which file and what to do instead."""


def save_checkpoint(run_dir: Path, step: int, *, policy: nn.Module,
                    tokenizer: PreTrainedTokenizerBase, optimizers: dict[str, Any],
                    critic: nn.Module | None = None,
                    extra_state: dict[str, Any] | None = None,
                    policies: dict[str, tuple[nn.Module, nn.Module | None]] | None = None
                    ) -> Path:
    """Write ``run_dir/checkpoints/step_<step>`` atomically and return its path
    (``policies``: name → (policy, critic or None) of each separate policy)."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step}"
    tmp = root / f".tmp_step_{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save_pretrained(str(tmp))  # type: ignore[operator]
    tokenizer.save_pretrained(str(tmp))
    if critic is not None:
        critic.save_pretrained(tmp / "critic")  # type: ignore[operator]
    previous = latest_checkpoint(run_dir)
    try:
        with run_write(f"checkpoint step_{step}", tmp,
                        needed=lambda: dir_size(previous) if previous else None):
            policy.save_pretrained(str(tmp))  # type: ignore[operator]
            tokenizer.save_pretrained(str(tmp))
            if critic is not None:
                critic.save_pretrained(tmp / "critic")  # type: ignore[operator]
            for name, (other, other_critic) in (policies or {}).items():
                other.save_pretrained(str(tmp / POLICIES / name))  # type: ignore[operator]
                tokenizer.save_pretrained(str(tmp / POLICIES / name))
                if other_critic is not None:
                    other_critic.save_pretrained(  # type: ignore[operator]
                        tmp / POLICIES / name / "critic")
            torch.save({name: opt.state_dict() for name, opt in optimizers.items()
                        if opt is not None}, tmp / "optimizer.pt")
            state = {"step": step, "rng": _rng_state(), **(extra_state or {})}
            atomic_write_text(tmp / "state.json", json.dumps(state))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # never a half checkpoint (and free the space)
        raise
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def prune_checkpoints(run_dir: Path, keep_last: int) -> None:
    """Delete all but the newest ``keep_last`` complete checkpoints (and stale temporary
    directories of interrupted writes)."""
    for old in checkpoints(run_dir)[:-keep_last]:
        shutil.rmtree(old, ignore_errors=True)
    for tmp in (run_dir / "checkpoints").glob(".tmp_step_*"):
        shutil.rmtree(tmp, ignore_errors=True)


def drop_checkpoints_after(run_dir: Path, step: int) -> list[Path]:
    """Delete the checkpoints newer than ``step`` (a run going on from an earlier one must
    never resume from them); returns what was deleted."""
    newer = [p for p in checkpoints(run_dir) if checkpoint_step(p) > step]
    for path in newer:
        shutil.rmtree(path)
    return newer


def checkpoint_step(path: Path) -> int:
    """The step ``n`` of a ``checkpoints/step_<n>`` directory."""
    match = STEP_DIR.match(path.name)
    if match is None:
        raise ValueError(f"{path} is not a checkpoints/step_<n> directory")
    return int(match.group(1))


def checkpoints(run_dir: Path) -> list[Path]:
    """The complete ``checkpoints/step_<n>`` of a run, oldest first."""
    root = run_dir / "checkpoints"
    found = [p for p in root.glob("step_*")
             if STEP_DIR.match(p.name) and (p / "state.json").is_file()]
    return sorted(found, key=checkpoint_step)


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete ``checkpoints/step_<n>`` of a run, or None."""
    found = checkpoints(run_dir)
    return found[-1] if found else None


def resume_checkpoint(run_dir: Path, choice: str | None = None) -> Path | None:
    """The checkpoint ``turnrl train --resume run_dir`` continues from: ``choice``
    (``--resume-from``: ``step_<n>``, ``<n>`` or the checkpoint's path), else the newest
    complete one (None: there is none, the run starts over). Raises
    :class:`CheckpointError` when it is missing or corrupt, offering the newest sound
    earlier checkpoint; nothing is changed on disk."""
    found = checkpoints(run_dir)
    if choice is None:
        if not found:
            return None
        chosen = found[-1]
    else:
        chosen = _chosen(run_dir, choice, found)
    problem = checkpoint_problem(chosen)
    if problem is None:
        return chosen
    earlier = next((p for p in reversed(found) if checkpoint_step(p) < checkpoint_step(chosen)
                    and checkpoint_problem(p) is None), None)
    offer = (f"resume from the previous one with `turnrl train --resume {run_dir} "
             f"--resume-from {earlier.name}`" if earlier is not None else
             f"no earlier checkpoint is sound: start a new run with `turnrl train "
             f"{run_dir / 'config.yaml'}`")
    raise CheckpointError(f"checkpoint {chosen} is corrupt ({problem}); nothing was changed; "
                          f"{offer}")


def _chosen(run_dir: Path, choice: str, found: list[Path]) -> Path:
    """The checkpoint ``--resume-from choice`` names."""
    name = Path(choice).name
    name = f"step_{name}" if name.isdigit() else name
    path = run_dir / "checkpoints" / name
    inside = Path(choice).name == choice or Path(choice).resolve() == path.resolve()
    if STEP_DIR.match(name) and inside and path.is_dir():
        return path
    names = ", ".join(p.name for p in found) or "none"
    raise CheckpointError(f"--resume-from {choice!r}: no checkpoint {name} in "
                          f"{run_dir / 'checkpoints'} (complete ones: {names}); give one of "
                          "those, e.g. --resume-from step_2")


def checkpoint_problem(path: Path) -> str | None:
    """Why checkpoint ``path`` cannot be resumed from, or None: ``state.json`` (with its step
    and RNG states), ``optimizer.pt`` and the weights (also each separate policy's) must be
    there, and every JSON,
    safetensors and torch file in it (also the critic's) must load."""
    missing = [name for name in ("state.json", "optimizer.pt") if not (path / name).is_file()]
    for folder in [path, *sorted((path / POLICIES).glob("*"))]:  # and each separate policy's
        if not any((folder / name).is_file() for name in WEIGHTS):
            where = "" if folder == path else f"{folder.relative_to(path)}/"
            missing.append(f"{where}{' or '.join(WEIGHTS)}")
    if missing:
        return f"missing {', '.join(missing)}"
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        if (problem := file_problem(file)) is not None:
            return f"{file.relative_to(path)} does not load: {problem}"
    state = json.loads((path / "state.json").read_text())
    if not (isinstance(state, dict) and isinstance(state.get("step"), int) and "rng" in state):
        return "state.json has no step and RNG states"
    return None


def file_problem(file: Path) -> str | None:
    """Why ``file`` does not load (judged by its suffix: JSON, safetensors, torch), or None.
    Only headers and pickles are read (torch files memory-mapped), not every tensor."""
    try:
        if file.suffix == ".json":
            json.loads(file.read_text(encoding="utf-8"))
        elif file.suffix == ".safetensors":
            with safe_open(str(file), "pt") as handle:
                handle.keys()
        elif file.suffix in (".pt", ".bin"):
            torch.load(file, map_location="cpu", mmap=True, weights_only=False)
    except Exception as error:  # any way of not loading is the answer
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
    return None


def load_training_state(checkpoint: Path, optimizers: dict[str, Any]) -> dict[str, Any]:
    """Restore optimizer and RNG states from ``checkpoint``; returns its ``state.json``."""
    saved = torch.load(checkpoint / "optimizer.pt", weights_only=False)
    for name, optimizer in optimizers.items():
        if optimizer is not None and name in saved:
            optimizer.load_state_dict(saved[name])
    state = json.loads((checkpoint / "state.json").read_text())
    _set_rng_state(state["rng"])
    return state


def _rng_state() -> dict[str, Any]:
    np_state = np.random.get_state()
    return {
        "python": _jsonable(random.getstate()),
        "numpy": [np_state[0], np_state[1].tolist(), *np_state[2:]],
        "torch": torch.get_rng_state().tolist(),
    }


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_tuples(state["python"]))
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), *rest))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, (tuple, list)) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
