"""The pretrained model's directory: Hugging Face files, probe results and a model card.

``write_model_dir`` writes to a temporary sibling and renames it into place, so the model dir
is whole or absent. The card (``README.md``) says how the model was made: the corpus recipe,
steps, tokens, seed, threads, wall time, the final losses and the probe scores.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import yaml

from turnrl.config import PretrainConfig, load_config
from turnrl.io import atomic_write_text
from turnrl.models.tiny import save_model_dir
from turnrl.pretrain.probes import markdown

CARD_TEMPLATE = """---
library_name: transformers
pipeline_tag: text-generation
tags: [turnrl, llama, character-level, synthetic-pretraining]
---

# turnrl tiny base ({params:,} parameters)

A small Llama-architecture causal LM with turnrl's character-level ChatML tokenizer,
pretrained by `turnrl pretrain` on a procedurally generated, env-agnostic corpus: copying
and induction, key-value lookup, choosing from a listed set, tool calls over random schemas,
multi-turn memory, arithmetic, counting and comparing (docs/pretraining.md). It imports
nothing from any turnrl env: what it brings to an env is transfer, not memorisation.

## How it was made

| | |
|---|---|
| command | `{command}` |
| shape | hidden {hidden}, {layers} layers, {heads} heads ({kv_heads} key/value), \
MLP {mlp}, {positions} positions |
| corpus | seed {corpus_seed}, rows of {seq_len} tokens, {conversations:,} conversations |
| steps | {steps:,} of {batch} rows, peak lr {lr}, warm-up {warmup}, cosine to {min_lr} x |
| tokens | {tokens:,} in rows ({trained:,} trained: assistant turns) |
| seed, threads | run seed {seed} (init seed {init_seed}), {threads} threads, \
torch {torch}, {machine} |
| wall time | {wall} |

Skill shares: {shares}.

## Final losses (mean of the last 50 steps, nats per trained token)

{losses}

## Probes (held-out, {examples} examples each; `turnrl probe`)

{probes}
"""


def run_totals(run_dir: Path, window: int = 50) -> tuple[dict[str, float], dict[str, float]]:
    """From ``metrics.jsonl``: the mean of each ``pretrain/loss*`` over the last ``window``
    steps, and the totals (``tokens``, ``trained_tokens``, ``conversations``)."""
    records = [json.loads(line) for line in
               (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    records = [r for r in records if r.get("phase") == "train"]
    tail = records[-window:]
    keys = sorted({k for r in tail for k in r if k.startswith("pretrain/loss")})
    losses = {k: sum(r[k] for r in tail if k in r) / max(1, sum(k in r for r in tail))
              for k in keys}
    totals = {"tokens": sum(r.get("pretrain/tokens", 0.0) for r in records),
              "trained_tokens": sum(r.get("pretrain/trained_tokens", 0.0) for r in records),
              "conversations": records[-1].get("pretrain/conversations", 0.0) if records else 0}
    return losses, totals


_NOT_IN_THE_WEIGHTS = ("run.name", "run.out_dir", "log.")  # where outputs go, what is shown


def reproduce_command(cfg: PretrainConfig) -> str:
    """``turnrl pretrain configs/pretrain.yaml`` with an override for every key where ``cfg``
    differs from the shipped recipe (the packaged ``pretrain.yaml``), leaving out where the
    outputs go and what is logged: the command that makes these weights again."""
    shipped_recipe = Path(str(resources.files("turnrl") / "configs" / "pretrain.yaml"))
    recipe = load_config(shipped_recipe, [], schema=PretrainConfig)
    mine, shipped = _leaves(cfg.model_dump(mode="json")), _leaves(recipe.model_dump(mode="json"))
    overrides = [_override(key, value) for key, value in mine.items()
                 if shipped.get(key) != value and not key.startswith(_NOT_IN_THE_WEIGHTS)]
    return " ".join(["turnrl pretrain configs/pretrain.yaml", *overrides])


def _leaves(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; a mapping of skill shares stays one value."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and not key.endswith("shares"):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _override(key: str, value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    text = text.removesuffix("\n...").strip()
    return f"'{key}={text}'" if any(c in text for c in " {}[]:,") else f"{key}={text}"


def model_card(cfg: PretrainConfig, *, params: int, probes: dict[str, dict[str, float]],
               losses: dict[str, float], totals: dict[str, float], wall_time_s: float) -> str:
    """The README.md of the model dir."""
    m, o = cfg.model, cfg.optim
    loss_rows = "\n".join(f"| {k.removeprefix('pretrain/')} | {v:.4f} |"
                          for k, v in losses.items())
    minutes, seconds = divmod(round(wall_time_s), 60)
    return CARD_TEMPLATE.format(
        params=params, command=reproduce_command(cfg), hidden=m.hidden_size, layers=m.num_layers,
        heads=m.num_heads, kv_heads=m.num_kv_heads, mlp=m.intermediate_size,
        positions=m.max_position_embeddings, corpus_seed=cfg.corpus.seed,
        seq_len=cfg.corpus.seq_len, conversations=int(totals["conversations"]),
        steps=o.steps, batch=o.batch_size, lr=o.lr, warmup=o.warmup_steps,
        min_lr=o.min_lr_ratio, tokens=int(totals["tokens"]),
        trained=int(totals["trained_tokens"]), seed=cfg.run.seed, init_seed=m.seed,
        threads=cfg.run.threads, torch=torch.__version__,
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs",
        wall=f"{minutes} min {seconds} s", shares=", ".join(
            f"{k} {v:g}" for k, v in cfg.corpus.shares.items()),
        losses="| loss | nats |\n|---|---|\n" + loss_rows, examples=cfg.probe.examples,
        probes=markdown({"this model": probes}))


def write_model_dir(path: Path, model: Any, tokenizer: Any, cfg: PretrainConfig, *,
                    probes: dict[str, dict[str, float]], wall_time_s: float) -> Path:
    """The final model dir at ``path`` (replaced whole): weights, tokenizer, generation
    config, ``pretrain.yaml`` (the recipe), ``probes.json``, ``probes.md`` and ``README.md``."""
    losses, totals = run_totals(path.parent)
    tmp = path.with_name(f".tmp_{path.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model_dir(tmp, model, tokenizer)
    atomic_write_text(tmp / "pretrain.yaml", yaml.safe_dump(cfg.model_dump(mode="json"),
                                                            sort_keys=False))
    atomic_write_text(tmp / "probes.json", json.dumps(probes, indent=2) + "\n")
    atomic_write_text(tmp / "probes.md", markdown({"this model": probes}))
    params = sum(p.numel() for p in model.parameters())
    atomic_write_text(tmp / "README.md", model_card(
        cfg, params=params, probes=probes, losses=losses, totals=totals,
        wall_time_s=wall_time_s))
    if path.exists():
        shutil.rmtree(path)
    os.replace(tmp, path)
    return path
