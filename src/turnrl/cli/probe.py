"""``turnrl probe``: models scored on the held-out probes of :mod:`turnrl.pretrain.probes`
(copy, lookup, tool calls on unseen schemas, ...), one column per model: any model dir, run
dir, ``tiny`` or ``tiny-random``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from turnrl.cli.common import AddParser, UsageError


def add_parser(add: AddParser) -> None:
    p = add("probe", help="score models on the held-out probes (copy, lookup, tool calls...)",
            description="Held-out probes of what a model does with its context: copy accuracy "
            "at 64, 256 and 1,024 characters, lookup, choosing, memory, arithmetic, counting, "
            "tool calls on unseen schemas. One column per model.")
    p.add_argument("models", nargs="+", metavar="MODEL", help="a model dir, a run dir, 'tiny' "
                   "(the shipped base) or 'tiny-random' (the random init)")
    p.add_argument("--examples", type=int, default=128, help="examples per probe (default 128)")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    p.add_argument("--out", metavar="DIR", help="also write probes.json and probes.md there")
    p.set_defaults(fn=run)


def run(args: argparse.Namespace) -> int:
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
    raise UsageError(f"{model!r} is not a model: give a Hugging Face model dir, a run "
                     "dir (its model/ or newest checkpoint), 'tiny' or 'tiny-random'")
