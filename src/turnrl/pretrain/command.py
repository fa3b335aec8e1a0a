"""``turnrl pretrain`` and ``turnrl probe``: their parsers and bodies.

``turnrl pretrain [CONFIG.yaml] [key=value ...]`` (default: the shipped recipe,
``configs/pretrain.yaml``), ``--resume RUN_DIR``; ``turnrl probe MODEL`` scores any model dir,
run dir, ``tiny`` or ``tiny-random`` on the held-out probes.
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console

PRETRAIN_CONFIG = "configs/pretrain.yaml"


class PretrainUsageError(ValueError):
    """A bad ``turnrl pretrain`` / ``turnrl probe`` argument."""


def default_pretrain_config() -> Path:
    """``configs/pretrain.yaml`` in the working directory, else the packaged copy."""
    local = Path(PRETRAIN_CONFIG)
    return local if local.is_file() else Path(str(resources.files("turnrl") / PRETRAIN_CONFIG))


def cmd_pretrain(args: argparse.Namespace) -> int:
    from turnrl.config import PretrainConfig, load_config
    from turnrl.pretrain.launch import launch

    items = list(args.items)
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").is_file():
            raise PretrainUsageError(f"--resume {args.resume!r}: no config.yaml there; give a "
                                     "pretraining run directory such as runs/pretrain")
        cfg = load_config(run_dir / "config.yaml", items, schema=PretrainConfig)
    else:
        path = Path(items.pop(0)) if items and "=" not in items[0] else default_pretrain_config()
        cfg = load_config(path, items, schema=PretrainConfig)
        run_dir = None
    result = launch(cfg, resume=run_dir)
    from turnrl.pretrain.probes import markdown

    print(markdown({"probes": result.probes}))  # plain: a table never wraps
    minutes, seconds = divmod(round(result.wall_time_s), 60)
    Console().print(f"pretrained in {minutes} min {seconds} s; model: [bold]{result.model_dir}[/] "
                  f"(load it with model.path={result.model_dir})")
    return 0


def probe_source(model: str) -> Path:
    """The model dir ``turnrl probe`` loads: ``tiny`` / ``tiny-random`` (written to a
    scratch dir), a run dir (its ``model/``, else its newest checkpoint) or a model dir."""
    from turnrl.models.base import builtin_model_dir
    from turnrl.train.checkpoint import latest_checkpoint

    builtin = builtin_model_dir(model)
    if builtin is not None:
        return builtin
    path = Path(model)
    if (path / "config.json").is_file():
        return path
    if (path / "model" / "config.json").is_file():
        return path / "model"
    checkpoint = latest_checkpoint(path) if path.is_dir() else None
    if checkpoint is not None:
        return checkpoint
    raise PretrainUsageError(f"{model!r} is not a model: give a Hugging Face model dir, a run "
                             "dir (its model/ or newest checkpoint), 'tiny' or 'tiny-random'")


def cmd_probe(args: argparse.Namespace) -> int:
    import torch

    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.pretrain.probes import markdown, run_probes

    torch.set_num_threads(args.threads)
    results: dict[str, Any] = {}
    for model in args.models:
        source = probe_source(model)
        policy = load_policy(source, dtype=torch.float32, device=torch.device("cpu"))
        results[model] = run_probes(policy, load_tokenizer(source), args.examples)
    table = markdown(results)
    print(table)  # plain: a table never wraps
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "probes.json").write_text(json.dumps(results, indent=2) + "\n")
        (out / "probes.md").write_text(table)
    return 0


def add_parsers(add: Any, epilog: str) -> None:
    """Add ``pretrain`` and ``probe`` to the CLI (``add(name, **kwargs)`` makes a subparser)."""
    p = add("pretrain", help="pretrain the built-in model on the procedural corpus",
            description="Pretrain the built-in tiny model on an env-agnostic synthetic corpus "
            "(copying, lookup, listed commands, tool calls over random schemas, memory, "
            "arithmetic, counting). Default config: configs/pretrain.yaml, the shipped base's "
            "recipe. Writes runs/<name>/ with model/ (a Hugging Face model dir and its card).",
            epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("items", nargs="*", metavar="[CONFIG.yaml] [key.sub=value ...]")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a pretraining run from its "
                   "newest checkpoint")
    p.set_defaults(fn=cmd_pretrain)

    p = add("probe", help="score models on the held-out probes (copy, lookup, tool calls...)",
            description="Held-out probes of what a model does with its context: copy accuracy "
            "at 64, 256 and 1,024 characters, lookup, choosing, memory, arithmetic, counting, "
            "tool calls on unseen schemas. One column per model.")
    p.add_argument("models", nargs="+", metavar="MODEL", help="a model dir, a run dir, 'tiny' "
                   "(the shipped base) or 'tiny-random' (the random init)")
    p.add_argument("--examples", type=int, default=128, help="examples per probe (default 128)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--out", metavar="DIR", help="also write probes.json and probes.md there")
    p.set_defaults(fn=cmd_probe)
