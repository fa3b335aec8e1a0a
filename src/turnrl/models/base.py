"""The built-in models by name: ``tiny`` (the pretrained base shipped in the package) and
``tiny-random`` (the random initialisation it was pretrained from).

``tiny`` is ``turnrl/models/base_model/``, a Hugging Face model dir written by
``turnrl pretrain configs/pretrain.yaml`` (its ``README.md`` is the model card, its
``pretrain.yaml`` the recipe). ``tiny-random`` is built on demand from ``model.tiny.*``
(:func:`turnrl.models.tiny.init_tiny_model`). Both load like any downloaded model.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import tempfile
from importlib import resources
from pathlib import Path

from turnrl.config import TinyConfig
from turnrl.models.tiny import init_tiny_model

BUILTIN = ("tiny", "tiny-random")


def shipped_base_dir() -> Path:
    """The packaged pretrained base (read-only: copy it before writing next to it)."""
    return Path(str(resources.files("turnrl") / "models" / "base_model"))


def shipped_shape() -> TinyConfig:
    """The shape of the shipped base (its ``pretrain.yaml``'s ``model`` section)."""
    import yaml

    recipe = yaml.safe_load((shipped_base_dir() / "pretrain.yaml").read_text())
    return TinyConfig(**recipe["model"])


@functools.lru_cache(maxsize=1)
def shipped_base_digest() -> str:
    """The first 12 hex digits of the SHA-256 of the shipped base's weights (what names the
    base in sweep keys)."""
    return hashlib.sha256((shipped_base_dir() / "model.safetensors").read_bytes()).hexdigest()[:12]


def write_builtin(name: str, path: Path, shape: TinyConfig | None = None) -> Path:
    """Write the built-in model ``name`` (``tiny`` or ``tiny-random``, of ``shape``) to
    ``path`` as a Hugging Face model dir and return it."""
    if name == "tiny-random":
        return init_tiny_model(path, shape)
    if name != "tiny":
        raise ValueError(f"unknown built-in model {name!r}; choose one of {BUILTIN}")
    shutil.copytree(shipped_base_dir(), path, dirs_exist_ok=True)
    return path


def builtin_model_dir(name: str) -> Path | None:
    """A model dir for a built-in name (``tiny``: the packaged dir itself; ``tiny-random``:
    written to a fresh temporary dir), else None."""
    if name == "tiny":
        return shipped_base_dir()
    if name == "tiny-random":
        return init_tiny_model(Path(tempfile.mkdtemp(prefix="turnrl-tiny-random-")))
    return None
