"""What a model dir holds, read without loading its weights, so a damaged or unsuitable
model is refused before a run starts:

- :func:`read_config`: every JSON file of the dir parsed (``config.json``,
  ``tokenizer_config.json``, ...: a corrupt one is named, with its line and column) and the
  config read by transformers' ``AutoConfig`` (a hub id's too);
- :func:`check_weights`: some weights are there, every shard an index names exists, and
  every safetensors file is whole: its header (the first ``8 + N`` bytes) gives each
  tensor's byte range, and the last range must end within the file (a cut-short download
  or copy does not);
- :func:`adaptable_modules`: the names of the layers LoRA can adapt, from the model built
  on the meta device (no memory, no weights).

Each failure raises :class:`~turnrl.models.policy.ModelLoadError` naming ``model.path``, the
file and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig
from transformers.pytorch_utils import Conv1D

from turnrl.io import looks_local, suggest_path
from turnrl.models.policy import ModelLoadError

# The module types peft's LoRA can wrap (transformers' Conv1D is GPT-2's linear layer).
ADAPTABLE_TYPES = (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d, nn.Conv3d, Conv1D)
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "adapter_model.safetensors", "adapter_model.bin")
_DOWNLOAD_AGAIN = "the download or copy was cut short or damaged: download the model again"


def is_adapter_dir(path: str | Path) -> bool:
    """A peft LoRA checkpoint (``adapter_config.json``): its base model is loaded from elsewhere."""
    return (Path(path).expanduser() / "adapter_config.json").is_file()


def read_config(path: str) -> PretrainedConfig | None:
    """The model's config (None for a LoRA adapter dir, whose base model is elsewhere); the
    JSON files of a local dir are parsed first, so a corrupt one is named."""
    local = Path(path).expanduser()
    if local.is_dir():
        for file in sorted(local.glob("*.json")):  # config, tokenizer, generation, index
            _read_json(path, file)
        if is_adapter_dir(local) and not (local / "config.json").is_file():
            return None
    if not local.exists() and looks_local(path):
        raise ModelLoadError(f"model.path {path!r}: no such directory{suggest_path(local)}; "
                             "give a model dir, a hub id, tiny or tiny-random")
    if not local.is_dir() and (problem := hub_problem(path)) is not None:
        raise ModelLoadError(problem)
    try:
        return AutoConfig.from_pretrained(path)
    except (OSError, ValueError, KeyError, TypeError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        if local.is_dir():
            raise ModelLoadError(f"model.path {path!r}: transformers cannot read its config.json "
                                 f"({first}); fix the file or download the model again") from None
        raise ModelLoadError(
            f"model.path {path!r} is not a local directory and cannot be loaded as a Hugging "
            f"Face hub id ({first}); check the path or the id (and the network, or set "
            "HF_HUB_OFFLINE=1 to use a cached copy)") from None


def hub_problem(path: str, *, timeout_s: float = 3.0) -> str | None:
    """Why hub id ``path`` cannot be loaded here, said at once instead of after the hub
    client's retries: it is not in the local cache and ``HF_HUB_OFFLINE`` is set, or the
    hub (``HF_ENDPOINT``, default huggingface.co) does not answer within ``timeout_s``.
    None when it is cached or the hub answers."""
    import os
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants, try_to_load_from_cache

    try:
        if isinstance(try_to_load_from_cache(path, "config.json"), str):
            return None
    except ValueError:  # not a valid repo id: transformers says why
        return None
    fix = ("give a local model dir (a path here), or download it where there is network "
           f"(`huggingface-cli download {path} --local-dir DIR`) and pass DIR")
    if constants.HF_HUB_OFFLINE:
        return (f"model.path {path!r} is not a local directory nor in the Hugging Face cache, "
                f"and HF_HUB_OFFLINE is set; {fix}")
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", constants.ENDPOINT))
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or 443
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as error:
        return (f"model.path {path!r} is not a local directory nor in the Hugging Face cache, "
                f"and the hub ({host}) cannot be reached from here ({error}); {fix} (with "
                "HF_HUB_OFFLINE=1 a cached copy is used without asking the hub)")
    return None


def _read_json(path: str, file: Path) -> dict:
    """A JSON object file of the model dir, or a :class:`ModelLoadError` naming the problem."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ModelLoadError(
            f"model.path {path!r}: {file.name} is not valid JSON (line {error.lineno} column "
            f"{error.colno}: {error.msg}); {_DOWNLOAD_AGAIN}, or fix the file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ModelLoadError(f"model.path {path!r}: cannot read {file.name}: {error}") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"model.path {path!r}: {file.name} must hold a JSON object, got "
                             f"{type(data).__name__}; {_DOWNLOAD_AGAIN}")
    return data


def check_weights(path: str) -> None:
    """The local model dir ``path`` has weights, all its shards, and whole safetensors files."""
    local = Path(path).expanduser()
    if not any((local / name).is_file() for name in WEIGHT_FILES) \
            and not any(local.glob("*.safetensors")):
        raise ModelLoadError(
            f"model.path {path!r} has a config.json but no weights (no model.safetensors, "
            f"pytorch_model.bin or their index); {_DOWNLOAD_AGAIN}")
    files = set(local.glob("*.safetensors"))
    for index in sorted(local.glob("*.index.json")):
        weight_map = _read_json(path, index).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ModelLoadError(f"model.path {path!r}: {index.name} has no 'weight_map' "
                                 f"mapping; {_DOWNLOAD_AGAIN}")
        missing = sorted({str(shard) for shard in weight_map.values()}
                         - {p.name for p in local.iterdir()})
        if missing:
            raise ModelLoadError(
                f"model.path {path!r}: {index.name} names shard(s) that are not there: "
                f"{', '.join(missing)}; {_DOWNLOAD_AGAIN}")
        files |= {local / str(shard) for shard in weight_map.values()
                  if str(shard).endswith(".safetensors")}
    for file in sorted(files):
        check_safetensors(path, file)


def check_safetensors(path: str, file: Path) -> None:
    """``file`` is a whole safetensors file: ``<N: u64 little-endian><N bytes of JSON header:
    name -> {dtype, shape, data_offsets: [begin, end]}><tensor bytes>``, and the largest
    ``end`` (relative to the tensor bytes) lies within the file."""
    size = file.stat().st_size
    with file.open("rb") as handle:
        head = handle.read(8)
        header_size = int.from_bytes(head, "little") if len(head) == 8 else None
        if header_size is None or 8 + header_size > size:
            raise ModelLoadError(
                f"model.path {path!r}: {file.name} is truncated ({size} bytes, shorter than "
                f"its own header); {_DOWNLOAD_AGAIN}")
        raw = handle.read(header_size)
    try:
        header = json.loads(raw)
        ends = [int(entry["data_offsets"][1]) for name, entry in header.items()
                if name != "__metadata__"]
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        raise ModelLoadError(f"model.path {path!r}: {file.name} is not a valid safetensors "
                             f"file (its header does not parse); {_DOWNLOAD_AGAIN}") from None
    needed = 8 + header_size + max(ends, default=0)
    if needed > size:
        raise ModelLoadError(
            f"model.path {path!r}: {file.name} is truncated: its tensors end at byte {needed} "
            f"but the file has {size} bytes; {_DOWNLOAD_AGAIN}")


def adaptable_modules(config: PretrainedConfig) -> list[str] | None:
    """The full names of the model's layers LoRA can adapt (``ADAPTABLE_TYPES``), from the
    model ``config`` describes built on the meta device; None when transformers cannot build
    it here (the caller then skips the check: loading reports what is wrong)."""
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception:  # an architecture this transformers cannot build: nothing to check
        return None
    return [name for name, module in model.named_modules()
            if isinstance(module, ADAPTABLE_TYPES)]
