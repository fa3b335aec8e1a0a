"""Requests and per-row sampling for :class:`turnrl.rollout.hf.HFEngine`.

Owns the records the engine schedules (``_Request``: a prompt awaiting its completion;
``_Row``: a running request's generator, stop ids and the tokens, log-probs and weight
versions sampled so far) and the samplers: :func:`sample_rows` inverts each row's CDF at its
own uniform draw (per-row temperature and top-p), :func:`sample_tokens` applies one
``SamplingParams`` to every row. The batching and the KV cache live in :mod:`turnrl.rollout.hf`
and :mod:`turnrl.rollout.hf_kv`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import torch
from torch import Tensor

from turnrl.rollout.engine import Completion, SamplingParams, TokenSink


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    session: str | None
    future: asyncio.Future[Completion] | None = None
    result: Completion | None = None
    on_tokens: TokenSink | None = None  # told each sampled token (a streamed reply)

    def resolve(self, completion: Completion) -> None:
        self.result = completion
        if self.future is not None and not self.future.done():
            self.future.set_result(completion)

    def fail(self, error: BaseException) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_exception(error)


UNIFORM_BLOCK = 64  # uniforms a row draws from its generator at a time


@dataclass
class _Row:
    """A running request: its sampling state and what it has sampled so far."""

    request: _Request
    generator: torch.Generator
    stop_ids: frozenset[int]
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # engine version at each sampled token
    alive: bool = True  # False once resolved: the row waits in the batch until compaction
    _uniforms: list[float] = field(default_factory=list)  # drawn ahead, consumed from the end

    def next_uniform(self) -> float:
        """The row's next U[0, 1) draw from its own generator.

        Draws come in blocks of :data:`UNIFORM_BLOCK`: one ``torch.rand`` call per block, not
        per token (a call per row and token cost 0.2–0.3 ms of a batch-64 decoding step).
        The numbers and their order are those of one call per token, so the stream depends
        only on the row's seed, never on its batch mates.
        """
        if not self._uniforms:
            self._uniforms = torch.rand(UNIFORM_BLOCK, generator=self.generator).tolist()[::-1]
        return self._uniforms.pop()

    def finished(self) -> bool:
        return bool(self.tokens) and (self.tokens[-1] in self.stop_ids
                                      or len(self.tokens) >= self.request.params.max_new_tokens)


def sample_rows(logits: Tensor, temperature: Tensor, top_p: Tensor,
                uniform: Tensor) -> tuple[Tensor, Tensor]:
    """Sample one token per row by inverting its CDF at the row's uniform draw.

    Args:
        logits: (B, V) raw next-token logits.
        temperature: (B,) per-row temperature; 0 is greedy (argmax, uniform unused).
        top_p: (B,) per-row nucleus mass: keep the smallest prefix of the sorted distribution
            whose mass exceeds ``top_p`` (1 keeps everything).
        uniform: (B,) draws from U[0, 1).
    Returns:
        tokens (B,) and their log-probs (B,) under ``log_softmax(logits / T)`` (T = 1 for
        greedy rows), before any top-p truncation.
    """
    greedy = temperature == 0
    logp = torch.log_softmax(logits / torch.where(greedy, 1.0, temperature)[:, None], -1)
    probs = logp.exp()
    if bool((top_p < 1.0).any()):
        sorted_probs, order = probs.sort(-1, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs > top_p[:, None]  # keep first > p
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs.masked_fill(outside, 0))
    cdf = probs.cumsum(-1)
    target = (uniform * cdf[:, -1])[:, None]
    sampled = torch.searchsorted(cdf, target, right=True)[:, 0].clamp(max=logits.shape[-1] - 1)
    tokens = torch.where(greedy, logits.argmax(-1), sampled)
    return tokens, logp.gather(-1, tokens[:, None])[:, 0]


def sample_tokens(logits: Tensor, params: SamplingParams,
                  generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Sample one token per row, every row with the same ``params`` (see :func:`sample_rows`).

    Args:
        logits: (B, V) raw next-token logits.
    Returns:
        tokens (B,) and their log-probs (B,).
    """
    rows = logits.shape[0]
    uniform = torch.rand(rows, generator=generator).to(logits.device)
    return sample_rows(logits, torch.full((rows,), float(params.temperature), device=logits.device),
                       torch.full((rows,), float(params.top_p), device=logits.device), uniform)
