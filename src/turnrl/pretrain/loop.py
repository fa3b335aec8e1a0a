"""``turnrl pretrain``: the built-in model, pretrained on the procedural corpus.

One step, read top to bottom::

    rows = corpus.batch(next_index, optim.batch_size)     # packed rows, assistant-token mask
                                                          # (shorter, more rows: first steps)
    loss = Σ w·(-log p(token)) / Σ w     w = 1 on assistant tokens, corpus.context_weight on
                                          the rest (0 on padding)
    loss.backward(); all-reduce (data parallel); clip; AdamW step at lr(step)
    every checkpoint.every steps: checkpoints/step_<n>/ (weights, optimizer, next_index)

The run writes ``runs/<name>/``: ``config.yaml``, ``metrics.jsonl`` (and TensorBoard),
``checkpoints/``, and at the end ``model/``: a Hugging Face model dir (weights, tokenizer with
its chat template, generation config), ``probes.json`` and ``probes.md``, and a model card
(``README.md``). Everything the loop draws comes from the corpus seed and the conversation
index, and a checkpoint holds the weights, the optimizer and that index, so a resumed run
computes the same steps as one that never stopped; with the same threads and seed, two runs
give the same weights bit for bit.

Data parallel: under ``torchrun`` (``WORLD_SIZE`` > 1) or with ``distributed.backend=ray``,
rank ``r`` of ``N`` takes rows ``r, r+N, ...`` of each step's batch; every rank normalises by
the batch's whole token count, so the summed gradients are the one-process gradient.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from turnrl.config import ConfigError, PretrainConfig, save_config
from turnrl.distributed.data_parallel import DataParallel
from turnrl.io import new_run_dir
from turnrl.models.policy import load_policy
from turnrl.models.tiny import build_model, build_tokenizer
from turnrl.pretrain.card import write_model_dir
from turnrl.pretrain.corpus import SKILLS, Corpus
from turnrl.pretrain.probes import headline, run_probes
from turnrl.train.checkpoint import (
    latest_checkpoint,
    load_training_state,
    prune_checkpoints,
    save_checkpoint,
)
from turnrl.train.progress import Progress
from turnrl.train.tracking import MetricsLogger


@dataclass(frozen=True)
class PretrainResult:
    run_dir: Path
    model_dir: Path
    probes: dict[str, dict[str, float]]
    wall_time_s: float


def check_pretrain_config(cfg: PretrainConfig) -> None:
    """What loading cannot check: the skills named in ``corpus.shares`` and the row length
    against the model's positions. Raises :class:`ConfigError` before any run dir exists."""
    for key, shares in (("corpus.shares", cfg.corpus.shares),
                        ("corpus.short_shares", cfg.corpus.short_shares or {"copy": 1.0})):
        unknown = sorted(set(shares) - set(SKILLS))
        where = cfg.origin_of(key)
        if unknown:
            raise ConfigError(f"{where + ': ' if where else ''}{key}: unknown skill "
                              f"{unknown[0]!r}; the skills are {', '.join(SKILLS)}")
        if any(v < 0 for v in shares.values()) or sum(shares.values()) <= 0:
            raise ConfigError(f"{where + ': ' if where else ''}{key}: weights must be >= 0 "
                              f"and not all 0, got {shares}")
    if cfg.corpus.seq_len > cfg.model.max_position_embeddings:
        raise ConfigError(f"corpus.seq_len: {cfg.corpus.seq_len} tokens is more than the "
                          f"model's {cfg.model.max_position_embeddings} positions; set "
                          f"corpus.seq_len <= model.max_position_embeddings")


def learning_rate(cfg: PretrainConfig, step: int) -> float:
    """Linear warm-up to ``optim.lr`` over ``warmup_steps``, then cosine to
    ``lr · min_lr_ratio`` at ``optim.steps`` (``step`` counts from 0)."""
    o = cfg.optim
    if step < o.warmup_steps:
        return o.lr * (step + 1) / o.warmup_steps
    progress = (step - o.warmup_steps) / max(1, o.steps - o.warmup_steps)
    return o.lr * (o.min_lr_ratio + (1 - o.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi
                                                                             * progress)))


def _optimizer(cfg: PretrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """AdamW; weight decay on matrices, not on norms (embeddings are tied to the output)."""
    decay = [p for p in model.parameters() if p.ndim >= 2]
    other = [p for p in model.parameters() if p.ndim < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.optim.weight_decay},
                              {"params": other, "weight_decay": 0.0}],
                             lr=cfg.optim.lr, betas=cfg.optim.betas)


def skill_losses(nll: torch.Tensor, loss_mask: torch.Tensor, skill_ids: torch.Tensor
                 ) -> dict[str, float]:
    """Mean NLL per skill of one batch (``pretrain/loss_<skill>``). All (B, T)."""
    out = {}
    for index, name in enumerate(SKILLS):
        weight = loss_mask * (skill_ids == index)
        count = float(weight.sum())
        if count:
            out[f"pretrain/loss_{name}"] = float((nll * weight).sum()) / count
    return out


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, rows: Any, *,
               lr: float, max_grad_norm: float, group: DataParallel | None,
               context_weight: float = 0.0) -> dict[str, float]:
    """One optimizer step on ``rows`` (this rank's share when ``group`` is set). The
    objective weighs assistant tokens 1 and context tokens ``context_weight``;
    ``pretrain/loss`` is the assistant tokens' mean NLL whatever the weight."""
    rank, world = (group.rank, group.world_size) if group else (0, 1)
    weights = rows.loss_mask + context_weight * (1 - rows.loss_mask) * rows.attention_mask
    total = weights[:, 1:].sum().clamp(min=1e-6)  # the whole batch's, on every rank
    answers = rows.loss_mask[:, 1:].sum().clamp(min=1.0)
    mine = slice(rank, None, world)
    input_ids = rows.input_ids[mine]
    loss_mask, skill_ids = rows.loss_mask[mine], rows.skill_ids[mine]
    for g in optimizer.param_groups:
        g["lr"] = lr
    model.train()
    optimizer.zero_grad(set_to_none=True)
    # rows are right-padded: under causal attention no real token sees the padding, so no
    # attention mask is needed (and SDPA keeps its fast causal kernel)
    logits = model(input_ids=input_ids).logits[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                            input_ids[:, 1:].reshape(-1), reduction="none")
    nll = nll.view(input_ids.shape[0], -1)
    mask = loss_mask[:, 1:]
    objective = (nll * weights[mine][:, 1:]).sum() / total
    objective.backward()
    sums = {"pretrain/loss": float((nll.detach() * mask).sum() / answers)}
    if group is not None:
        group.all_reduce_grads(model.parameters())
        sums = group.sum_metrics(sums)
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
    optimizer.step()
    return {**sums, "pretrain/grad_norm": grad_norm, "pretrain/lr": lr,
            "pretrain/tokens": float(rows.attention_mask.sum()),
            "pretrain/trained_tokens": float(answers),
            **skill_losses(nll.detach(), mask, skill_ids[:, 1:])}


def data_parallel(cfg: PretrainConfig, rank: int | None = None, world: int | None = None,
                   init_method: str | None = None) -> DataParallel | None:
    """The process group: given (Ray), or torchrun's environment, else none."""
    if world is None:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        init_method = "env://"
    if world <= 1:
        return None
    backend = "nccl" if torch.cuda.is_available() and cfg.run.device != "cpu" else "gloo"
    return DataParallel(int(rank or 0), world, init_method or "env://", backend)


def pretrain(cfg: PretrainConfig, run_dir: Path, *, resume: bool = False,
             group: DataParallel | None = None) -> PretrainResult | None:
    """Pretrain into ``run_dir`` (made by the caller; ``resume``: continue from its newest
    checkpoint). Returns the result on rank 0, None on other ranks."""
    rank = group.rank if group else 0
    torch.set_num_threads(cfg.run.threads)
    torch.manual_seed(cfg.run.seed)
    if cfg.run.deterministic:
        torch.use_deterministic_algorithms(True)
    tokenizer = build_tokenizer()
    checkpoint = latest_checkpoint(run_dir) if resume else None
    model = (load_policy(checkpoint, dtype=torch.float32, device=torch.device("cpu"))
             if checkpoint else build_model(len(tokenizer), cfg.model))
    optimizer = _optimizer(cfg, model)
    step, next_index, elapsed = 0, 0, 0.0
    if checkpoint is not None:
        state = load_training_state(checkpoint, {"policy": optimizer})
        step, next_index, elapsed = state["step"], state["next_index"], state["elapsed_s"]
    corpus = Corpus(tokenizer, seed=cfg.corpus.seed, seq_len=cfg.corpus.seq_len,
                    shares=cfg.corpus.shares)
    short = Corpus(tokenizer, seed=cfg.corpus.seed, seq_len=cfg.corpus.short_seq_len,
                   shares=cfg.corpus.short_shares or cfg.corpus.shares)
    short_rows = cfg.optim.batch_size * max(1, cfg.corpus.seq_len // cfg.corpus.short_seq_len)
    logger = MetricsLogger(run_dir, tensorboard=cfg.log.tensorboard,
                           resume_at=_kept_lines(run_dir, step) if resume else None) \
        if rank == 0 else None
    progress = Progress(enabled=cfg.log.progress and rank == 0)
    progress.note(f"turnrl pretrain: run {run_dir} (shape {cfg.model.hidden_size}x"
                  f"{cfg.model.num_layers}, {cfg.optim.steps} steps of {cfg.optim.batch_size} rows"
                  f" x {cfg.corpus.seq_len} tokens, seed {cfg.corpus.seed}"
                  f"{f', resumed at step {step}' if step else ''})")
    start = time.perf_counter() - elapsed
    with progress.task("pretrain", cfg.optim.steps, completed=step) as advance:
        while step < cfg.optim.steps:
            rows = short.batch(next_index, short_rows) if step < cfg.corpus.short_steps \
                else corpus.batch(next_index, cfg.optim.batch_size)
            metrics = train_step(model, optimizer, rows, lr=learning_rate(cfg, step),
                                 max_grad_norm=cfg.optim.max_grad_norm, group=group,
                                 context_weight=cfg.corpus.context_weight)
            step, next_index = step + 1, rows.next_index
            if logger is not None:
                logger.log(step, {**metrics, "pretrain/conversations": float(next_index)})
            advance(f"loss {metrics['pretrain/loss']:.3f}")
            if rank == 0 and (step % cfg.checkpoint.every == 0 or step == cfg.optim.steps):
                save_checkpoint(run_dir, step, policy=model, tokenizer=tokenizer,
                                optimizers={"policy": optimizer},
                                extra_state={"next_index": next_index,
                                             "elapsed_s": time.perf_counter() - start,
                                             "metrics_lines": logger.lines if logger else 0})
                prune_checkpoints(run_dir, cfg.checkpoint.keep_last)
            if rank == 0 and cfg.probe.every and step % cfg.probe.every == 0 \
                    and step < cfg.optim.steps and logger is not None:
                found = run_probes(model, tokenizer, cfg.probe.examples)
                logger.log(step, {f"probe/{k}": v for k, v in headline(found).items()},
                           phase="probe")
    if rank != 0:
        return None
    wall = time.perf_counter() - start
    probes = run_probes(model, tokenizer, cfg.probe.examples)
    assert logger is not None
    logger.log(step, {f"probe/{k}": v for k, v in headline(probes).items()}, phase="probe")
    logger.close()
    model_dir = write_model_dir(run_dir / "model", model, tokenizer, cfg, probes=probes,
                                wall_time_s=wall)
    return PretrainResult(run_dir, model_dir, probes, wall)


def _kept_lines(run_dir: Path, step: int) -> tuple[int, int] | None:
    """``(lines of metrics.jsonl, step)`` that the newest checkpoint had seen."""
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        return (0, 0)
    state = json.loads((checkpoint / "state.json").read_text())
    return (int(state.get("metrics_lines", 0)), step)


def open_pretrain_run(cfg: PretrainConfig, resume: Path | None) -> Path:
    """The run dir (new ``<out_dir>/<name>``, ``-2``... if taken; or ``resume``) with its
    ``config.yaml``."""
    check_pretrain_config(cfg)
    run_dir = resume if resume is not None else new_run_dir(cfg.run.out_dir, cfg.run.name)
    save_config(cfg, run_dir / "config.yaml")
    return run_dir
