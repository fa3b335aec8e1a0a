"""Checkpoints: a Hugging Face model dir plus optimizer, RNG and step, written atomically.

Layout of ``checkpoints/step_<n>/``: the policy (``save_pretrained``; LoRA adapters for peft
models), the tokenizer, ``critic/`` when a critic exists, ``optimizer.pt`` and ``state.json``
(step, RNG states). It is written to a temporary sibling and renamed into place, so a crash
never leaves a half checkpoint under the final name.
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
from torch import nn
from transformers import PreTrainedTokenizerBase

STEP_DIR = re.compile(r"^step_(\d+)$")


def save_checkpoint(run_dir: Path, step: int, *, policy: nn.Module,
                    tokenizer: PreTrainedTokenizerBase, optimizers: dict[str, Any],
                    critic: nn.Module | None = None,
                    extra_state: dict[str, Any] | None = None) -> Path:
    """Write ``run_dir/checkpoints/step_<step>`` atomically and return its path."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step}"
    tmp = root / f".tmp_step_{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    policy.save_pretrained(str(tmp))  # type: ignore[operator]
    tokenizer.save_pretrained(str(tmp))
    if critic is not None:
        critic.save_pretrained(tmp / "critic")  # type: ignore[operator]
    torch.save({name: opt.state_dict() for name, opt in optimizers.items() if opt is not None},
               tmp / "optimizer.pt")
    state = {"step": step, "rng": _rng_state(), **(extra_state or {})}
    (tmp / "state.json").write_text(json.dumps(state))
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
