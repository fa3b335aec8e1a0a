"""The embedded transformers engine: continuous batching with a KV cache, on CPU or one GPU.

Episodes call :meth:`HFEngine.generate` from their own asyncio tasks. The engine keeps one
running batch: every decoding step it first admits the requests that arrived since the last
step (prefilled together, in the running batch's decoding pass where the model allows it,
and merged into its KV cache), decodes one token for every running request, and hands each
finished request back at once,
so an episode that stops early steps its env and returns while the others keep decoding.

Each request samples from its own random generator (seeded by ``SamplingParams.seed`` or by
the engine), so its tokens do not depend on which other requests share its batch.

Keys and values live in pre-allocated buffers with spare room (:class:`GrowingLayer`): a
decoding step writes one column instead of copying the whole cache, as transformers'
``DynamicCache`` does by concatenation. Finished rows are dropped from the buffers lazily, when
new rows are merged in or a quarter of the rows are finished, so most steps copy nothing.

This module owns :class:`HFEngine`: the request queue, admission (prefill and session reuse),
decoding, and merging and compacting the running batch. The KV-cache storage
(:class:`GrowingLayer`, session caches) lives in :mod:`turnrl.rollout.hf_kv`; the request
records and the samplers (:func:`sample_rows`, :func:`sample_tokens`) in
:mod:`turnrl.rollout.hf_sampling`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import Cache, DynamicLayer

from turnrl.models.policy import cache_kwarg
from turnrl.rollout import hf_kv as kv
from turnrl.rollout.engine import Completion, SamplingParams, TokenSink
from turnrl.rollout.hf_decode import Extension, decode_step_for
from turnrl.rollout.hf_kv import GrowingLayer, _SessionCache, fill_rows, live_rows, stack_rows
from turnrl.rollout.hf_sampling import _Request, _Row, sample_rows, sample_tokens

if TYPE_CHECKING:
    from peft import PeftModel

__all__ = ["GrowingLayer", "HFEngine", "sample_rows", "sample_tokens"]

# Event-loop rounds between two decoding steps. A request's way from the socket (or a finished
# episode's next turn) to the queue takes a few rounds (read, parse, handler, capture); one
# round let most of them miss the next step and run a step later in smaller batches. Three
# rounds cost microseconds when nothing waits; bench/agents.py: 29.3 -> 31.3 episodes/s
# through the endpoint, the env runner unchanged.
YIELDS_BETWEEN_STEPS = 3
# Rows admitted while others decode are prefilled in the decoding pass (one pass a step)
# up to this many attention scores (rows x heads x new tokens x keys); larger admissions (new
# episodes' long first prompts) run a prefill pass of their own, whose causal attention
# needs no mask tensor: 16 prompts of 300 tokens took 87 ms that way and 104 ms in the
# decoding pass, 16 of 100 tokens 22 ms either way (2 threads, the built-in model).
FUSED_ATTENTION_LIMIT = 1 << 21


class HFEngine:
    """Token-in / token-out generation with any Hugging Face causal LM.

    The running batch is ``rows`` (B requests) with per-layer keys/values of shape
    ``(B, kv_heads, L, head_dim)`` and an attention mask ``(B, L)``: each row's tokens are
    right-aligned (left padding, never attended to), and its position ids count only its own
    tokens, so a row's logits do not depend on its batch mates.

    Args:
        model: the policy (shared in-process with the learner: ``load_weights`` is a no-op).
        eos_token_id: the token that ends an assistant turn.
        pad_token_id: the id used for left padding (never attended to).
        max_batch_size: at most this many requests decode together; the rest wait for a slot.
        seed: seed of the engine's generator, which seeds requests that bring no seed.
        reuse_kv: keep each session's KV cache between its turns, so a turn prefills only
            the tokens appended since the last one (the observation delta) instead of the
            whole conversation. The sampled distribution is unchanged.
        fast_decode: decoding steps of a Llama-family model run through
            :class:`~turnrl.rollout.hf_decode.DecodeStep` (the same logits to float rounding,
            without the transformers forward's per-step overhead); other models, or False,
            decode through ``model(...)``.
    """

    def __init__(self, model: PreTrainedModel | PeftModel, *, eos_token_id: int,
                 pad_token_id: int, max_batch_size: int = 256, seed: int = 0,
                 reuse_kv: bool = True, fast_decode: bool = True) -> None:
        self.model = model
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id
        self.max_batch_size = max_batch_size
        self.device = next(model.parameters()).device
        self.generator = torch.Generator().manual_seed(seed)
        self.version = 0  # the learner version of the weights (set by whoever pushes them)
        self.reuse_kv = reuse_kv
        self._sessions: dict[str, _SessionCache] = {}
        # sessions whose request finished since the last step: (row, the columns it used),
        # copied out of the batch at the next step unless the episode ends first
        self._unstored: dict[str, tuple[int, list[tuple[int, int]]]] = {}
        self._pending: list[_Request] = []
        self._worker: asyncio.Task[None] | None = None
        # the running batch
        self._rows: list[_Row] = []
        self._cache: Cache | None = None
        self._mask = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        # streamed requests prefilled by the last step, merged into the batch by the next
        self._prefilled: tuple[list[_Row], DynamicCache, Tensor, int] | None = None
        self._cache_kwarg = cache_kwarg(model)
        # decoding steps skip the transformers forward where the architecture allows it
        self._decode = decode_step_for(model) if fast_decode else None
        self.stats = {"prefills": 0, "decode_steps": 0, "requests": 0, "prefill_tokens": 0,
                      "decode_tokens": 0, "max_running": 0, "prompt_tokens": 0,
                      "cached_tokens": 0}
        self._reported = {"prompt_tokens": 0, "cached_tokens": 0}

    # ------------------------------------------------------------------ Engine protocol
    async def generate(self, prompt_ids: list[int], params: SamplingParams, *,
                       session: str | None = None,
                       on_tokens: TokenSink | None = None) -> Completion:
        return await self.submit(prompt_ids, params, session=session, on_tokens=on_tokens)

    def submit(self, prompt_ids: list[int], params: SamplingParams, *,
               session: str | None = None,
               on_tokens: TokenSink | None = None) -> asyncio.Future[Completion]:
        """Queue the request now (it joins the next step) and return its future; cancelling
        the future abandons the request (:func:`turnrl.rollout.engine.submit`)."""
        loop = asyncio.get_running_loop()
        request = _Request(list(prompt_ids), params, session, future=loop.create_future(),
                           on_tokens=on_tokens)
        self._pending.append(request)
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._serve())
        return request.future

    def load_weights(self, model: torch.nn.Module | dict[str, Tensor]) -> None:
        """Take the learner's weights (a model, or its state dict; a no-op when the model is
        shared in-process); drops the cached sessions. Requests that are decoding go on with
        the new weights (a partial rollout: ``Completion.versions`` tells which tokens came
        from which)."""
        self._sessions.clear()
        self._unstored.clear()
        if model is not self.model:
            state = model if isinstance(model, dict) else model.state_dict()
            self.model.load_state_dict(state)

    def end_session(self, session: str) -> None:
        """Forget a finished episode's KV cache (never copied out of the batch if its last
        request finished after the engine's last step)."""
        self._sessions.pop(session, None)
        self._unstored.pop(session, None)

    def sleep(self) -> None:
        """Nothing to free: the engine shares the learner's weights."""

    def close(self) -> None:
        """Drop the cached sessions and the running batch (the model is the learner's)."""
        self._sessions.clear()
        self._reset_batch()
        self._prefilled = None

    def step_metrics(self) -> dict[str, float]:
        """Since the last call: the fraction of prompt tokens taken from a session's cached
        keys and values (``rollout/prefix_cache_hit_rate``)."""
        prompt = self.stats["prompt_tokens"] - self._reported["prompt_tokens"]
        cached = self.stats["cached_tokens"] - self._reported["cached_tokens"]
        self._reported = {"prompt_tokens": self.stats["prompt_tokens"],
                          "cached_tokens": self.stats["cached_tokens"]}
        return {"rollout/prefix_cache_hit_rate": cached / prompt if prompt else 0.0}

    # ------------------------------------------------------------------ scheduling
    async def _serve(self) -> None:
        """Step the running batch until no request is running or waiting.

        Between steps it yields to the event loop (:data:`YIELDS_BETWEEN_STEPS` rounds), so
        finished episodes step their envs and queue their next turns, which join at the next
        step. An idle engine first waits for
        the burst of requests to settle, so the first prefill takes all of them.
        """
        was_training = self.model.training
        self.model.eval()
        try:
            while self._pending or self._rows or self._prefilled is not None:
                if self._prefilled is None and not any(row.alive for row in self._rows):
                    await self._wait_until_settled()
                try:
                    self.step()
                except Exception as error:  # hand the failure to every request involved
                    prefilled = self._prefilled[0] if self._prefilled is not None else []
                    for request in [r.request for r in self._rows + prefilled] + self._pending:
                        request.fail(error)
                    self._clear()
                for _ in range(YIELDS_BETWEEN_STEPS):
                    await asyncio.sleep(0)
        except asyncio.CancelledError:  # the event loop is going away: leave nothing behind
            self._clear()
            raise
        finally:
            self.model.train(was_training)

    async def _wait_until_settled(self) -> None:
        """Yield to the event loop until no new requests arrive for two rounds."""
        seen, quiet = -1, 0
        while quiet < 2 and len(self._pending) < self.max_batch_size:
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._pending) == seen else 0
            seen = len(self._pending)

    @torch.inference_mode()
    def step(self) -> None:
        """Admit waiting requests into free slots, decode one token for every running
        request, and resolve the requests that finished. A step that admits streamed
        requests (``on_tokens``) prefills them and ends: their first tokens are sent before
        anything else is done, and their rows join the batch at the next step."""
        if not self._streamed_first():
            self._tidy()
        if self._prefilled is not None:
            self._merge(*self._prefilled)
            self._prefilled = None
            self._retire_finished()
        self._drop_abandoned()
        free = self.max_batch_size - sum(row.alive for row in self._rows)
        if self._pending and free > 0:
            admitted = self._admissible(free)
            chosen = {id(r) for r in admitted}
            self._pending = [r for r in self._pending if id(r) not in chosen]
            streamed = any(r.on_tokens is not None for r in admitted)
            steps = self.stats["decode_steps"]
            try:
                prefilled = self._prefill(admitted, decode=not streamed)
            except Exception:  # back to the queue, so the caller fails them with the rest
                self._pending = admitted + self._pending
                raise
            if streamed:
                self._prefilled = prefilled
                return  # a streamed reply's first token goes out before the next step
            self._merge(*prefilled)
            self._retire_finished()
            if self.stats["decode_steps"] > steps:
                return  # the prefill was this step's decoding pass
        if any(row.alive for row in self._rows):
            self._decode_step()
            self._retire_finished()

    def _streamed_first(self) -> bool:
        """Whether this step prefills waiting streamed requests before anything else,
        leaving the batch's tidying to the next step: there is room for them, and none
        continues a session whose cache is still in the batch."""
        return (self._prefilled is None and len(self._rows) < self.max_batch_size
                and any(r.on_tokens is not None for r in self._pending)
                and self._unstored.keys().isdisjoint(r.session for r in self._pending))

    def _admissible(self, free: int) -> list[_Request]:
        """The waiting requests this step admits (at most ``free``, oldest first). Streamed
        ones (``on_tokens``) go first, in a prefill of their own when others wait too: the
        step ends after it, so their first tokens leave without waiting for the others'
        prefill (the others join at the next step)."""
        streamed = [r for r in self._pending if r.on_tokens is not None]
        if streamed and len(streamed) < len(self._pending):
            return streamed[:free]
        return self._pending[:free]

    def generate_batch(self, prompts: list[list[int]],
                       params: SamplingParams | Sequence[SamplingParams], *,
                       sessions: list[str | None] | None = None) -> list[Completion]:
        """Decode a list of prompts to completion (synchronously) and return one each."""
        per_prompt = [params] * len(prompts) if isinstance(params, SamplingParams) else params
        requests = [_Request(list(p), sp, s) for p, sp, s in
                    zip(prompts, per_prompt, sessions or [None] * len(prompts), strict=True)]
        self._pending.extend(requests)
        was_training = self.model.training
        self.model.eval()
        try:
            while any(r.result is None for r in requests):
                self.step()
            self._tidy()  # keep the sessions' caches now and free the finished batch
        except Exception:
            self._clear()
            raise
        finally:
            self.model.train(was_training)
        return [r.result for r in requests]  # type: ignore[misc]

    def _drop_abandoned(self) -> None:
        """Forget requests nobody awaits any more (their episode's task was cancelled)."""
        self._pending = [r for r in self._pending if r.future is None or not r.future.done()]
        for row in self._rows:
            future = row.request.future
            if row.alive and future is not None and future.done():
                row.alive = False
        if self._rows and not self._unstored and not any(row.alive for row in self._rows):
            self._reset_batch()

    # ------------------------------------------------------------------ the running batch
    def _new_row(self, request: _Request) -> _Row:
        params = request.params
        seed = params.seed if params.seed is not None else int(
            torch.randint(0, 2**62, (1,), generator=self.generator))
        return _Row(request, torch.Generator().manual_seed(seed),
                    frozenset({self.eos_token_id, *params.stop_token_ids}))

    def _reusable(self, prompt: list[int], session: str | None) -> _SessionCache | None:
        cached = self._sessions.get(session) if (self.reuse_kv and session) else None
        n = len(cached.token_ids) if cached else 0
        return cached if cached and len(prompt) > n and prompt[:n] == cached.token_ids else None

    def _prefill(self, requests: list[_Request], *, decode: bool = False
                 ) -> tuple[list[_Row], DynamicCache, Tensor, int]:
        """Prefill ``requests`` in one pass (reusing their sessions' cached prefixes) and
        sample their first tokens: their rows, keys/values, mask and the spare columns their
        buffers need, for :meth:`_merge` into the running batch. With ``decode`` and a
        :class:`DecodeStep`, this is also the running batch's decoding step: in the same pass
        where the scores are within :data:`FUSED_ATTENTION_LIMIT`, else in a pass before, so
        which requests share a step never depends on the size of an admission.

        Requests with the same prompt and no cached prefix (the episodes of a group, on their
        first turn) are prefilled once; their rows then copy its keys, values and logits.
        """
        cached_all = [self._reusable(r.prompt_ids, r.session) for r in requests]
        keys = [tuple(r.prompt_ids) if c is None else i
                for i, (r, c) in enumerate(zip(requests, cached_all, strict=True))]
        owner_of: dict[object, int] = {}
        owner = [owner_of.setdefault(k, len(owner_of)) for k in keys]
        first = [owner.index(u) for u in range(len(owner_of))]  # a row for each prompt
        cached = [cached_all[i] for i in first]
        prefix = [len(c.token_ids) if c else 0 for c in cached]
        suffixes = [requests[i].prompt_ids[n:] for i, n in zip(first, prefix, strict=True)]
        input_ids, mask, position_ids, cache = kv.prefill_inputs(
            suffixes, cached, prefix, self.pad_token_id, self.device)
        step = self._decode if decode and any(r.alive for r in self._rows) else None
        if step and step.attention_size(*input_ids.shape, max(prefix)) <= FUSED_ATTENTION_LIMIT:
            cache = Cache(layers=list(cache.layers) or [  # type: ignore[arg-type]
                DynamicLayer() for _ in step.inner.layers])
            logits = self._decode_step(Extension(input_ids, cache, mask, position_ids))
        else:  # the same step in two passes (the batch's rows sample what they would)
            if step:
                self._decode_step()
            out = self.model(input_ids=input_ids, attention_mask=mask,
                             position_ids=position_ids, use_cache=True, logits_to_keep=1,
                             **{self._cache_kwarg: cache})
            logits = out.logits[:, -1, :]
        if len(first) < len(requests):  # one row per request, copied from its prompt's
            index = torch.tensor(owner, device=self.device)
            cache.batch_select_indices(index)
            mask, logits = mask.index_select(0, index), logits.index_select(0, index)
        rows = [self._new_row(r) for r in requests]
        self._sample(rows, logits)
        self.stats["prefills"] += 1
        self.stats["requests"] += len(requests)
        self.stats["prefill_tokens"] += sum(len(s) for s in suffixes)
        self.stats["prompt_tokens"] += sum(len(r.prompt_ids) for r in requests)
        self.stats["cached_tokens"] += sum(len(c.token_ids) for c in cached_all if c)
        running = sum(row.alive for row in self._rows) + len(rows)
        self.stats["max_running"] = max(self.stats["max_running"], running)
        return rows, cache, mask, max(r.params.max_new_tokens for r in requests)

    def _decode_step(self, extension: Extension | None = None) -> Tensor | None:
        """Feed every running row its last sampled token and sample the next one; with an
        ``extension`` (rows being admitted, :meth:`_prefill`) the same pass prefills it, and
        its rows' logits are returned."""
        position_ids = self._mask.sum(-1, keepdim=True)
        self._mask = torch.cat([self._mask, self._mask.new_ones(len(self._rows), 1)], 1)
        last = torch.tensor([row.tokens[-1] for row in self._rows], device=self.device)
        if self._decode is not None:
            assert self._cache is not None
            logits = self._decode(last, self._cache, self._mask, position_ids, extension)
        else:
            logits = self.model(input_ids=last[:, None], attention_mask=self._mask,
                                position_ids=position_ids, use_cache=True,
                                **{self._cache_kwarg: self._cache}).logits[:, -1, :]
        logits, admitted = logits[:len(self._rows)], logits[len(self._rows):]
        alive = [i for i, row in enumerate(self._rows) if row.alive]
        if len(alive) < len(self._rows):
            logits = logits[torch.tensor(alive, device=self.device)]
        self._sample([self._rows[i] for i in alive], logits)
        self.stats["decode_steps"] += 1
        return admitted if extension is not None else None

    def _sample(self, rows: list[_Row], logits: Tensor) -> None:
        """Sample one token per row with the row's own parameters and generator."""
        temperature = torch.tensor([r.request.params.temperature for r in rows])
        top_p = torch.tensor([r.request.params.top_p for r in rows])
        uniform = torch.tensor([r.next_uniform() for r in rows])
        tokens, logprobs = sample_rows(logits.float(), temperature.to(logits.device),
                                       top_p.to(logits.device), uniform.to(logits.device))
        for row, token, logprob in zip(rows, tokens.tolist(), logprobs.tolist(), strict=True):
            row.tokens.append(token)
            row.logprobs.append(logprob)
            row.versions.append(self.version)
            if row.request.on_tokens is not None:
                row.request.on_tokens([token], [logprob])
        self.stats["decode_tokens"] += len(rows)

    def _merge(self, rows: list[_Row], cache: DynamicCache, mask: Tensor, spare: int) -> None:
        """Put freshly prefilled ``rows`` into the running batch: into the rows of finished
        requests where there are enough and they are as wide (:func:`fill_rows`, a copy of
        the new rows only), else by rebuilding the batch as its live rows followed by them
        (:func:`stack_rows`: new buffers with ``spare`` free columns, without the finished
        rows and the columns that are padding in every live row)."""
        self._store_unstored()  # before the finished rows are overwritten or dropped
        free = [i for i, row in enumerate(self._rows) if not row.alive][:len(rows)]
        if len(free) == len(rows) and mask.shape[1] <= self._mask.shape[1]:
            assert self._cache is not None
            fill_rows(self._cache, self._mask, free, cache, mask)
            for i, row in zip(free, rows, strict=True):
                self._rows[i] = row
            return
        old = self._live_view()
        self._cache, self._mask = stack_rows(([old] if old is not None else []) + [(cache, mask)],
                                             spare)
        self._rows = [r for r in self._rows if r.alive] + rows

    def _live_view(self) -> tuple[Cache, Tensor] | None:
        """The live rows' keys/values and mask (:func:`live_rows`), or None."""
        alive = [i for i, row in enumerate(self._rows) if row.alive]
        if self._cache is None or not alive:
            return None
        return live_rows(self._cache, self._mask, alive)

    def _retire_finished(self) -> None:
        """Resolve finished rows and note the columns of their sessions' keys and values.
        They stay in the batch (decoded but ignored) until the next step's :meth:`_tidy`."""
        for i, row in enumerate(self._rows):
            if not (row.alive and row.finished()):
                continue
            stop = row.tokens[-1] in row.stop_ids
            if self.reuse_kv and row.request.session is not None:
                self._unstored[row.request.session] = (i, kv.column_runs(self._mask[i]))
            row.alive = False
            row.request.resolve(Completion(row.tokens, row.logprobs,
                                           "stop" if stop else "length", row.versions))

    def _tidy(self) -> None:
        """Before a step: copy out the caches of the sessions that finished a request since
        the last step and go on (an episode that ended meanwhile, e.g. every single-turn
        one, is never copied), then free the batch once every row is finished, or compact
        it once a quarter are and no request waits to take their rows (:meth:`_merge`)."""
        self._store_unstored()
        dead = sum(not row.alive for row in self._rows)
        if self._rows and dead == len(self._rows):
            self._reset_batch()
        elif dead and 4 * dead >= len(self._rows) and not self._pending:
            live = self._live_view()
            assert live is not None
            self._rows = [row for row in self._rows if row.alive]
            spare = max(r.request.params.max_new_tokens - len(r.tokens) for r in self._rows)
            self._cache, self._mask = stack_rows([live], spare)

    def _store_unstored(self) -> None:
        for session, (i, runs) in self._unstored.items():
            self._store_session(session, self._rows[i], i, runs)
        self._unstored.clear()

    def _store_session(self, session: str, row: _Row, i: int,
                       runs: list[tuple[int, int]]) -> None:
        """Keep the keys/values of ``row`` (row ``i`` of the batch, in the column ``runs``):
        its prompt and the sampled tokens that were fed back through the model (all but the
        last one)."""
        assert self._cache is not None
        fed = len(row.tokens) - 1
        self._sessions[session] = _SessionCache(
            token_ids=row.request.prompt_ids + row.tokens[:fed],
            keys=[kv.take_columns(layer.keys, i, runs) for layer in self._cache.layers],
            values=[kv.take_columns(layer.values, i, runs) for layer in self._cache.layers],
        )

    def _clear(self) -> None:
        """Forget every request: running, prefilled and waiting."""
        self._reset_batch()
        self._prefilled = None
        self._pending.clear()

    def _reset_batch(self) -> None:
        self._rows, self._cache = [], None
        self._unstored.clear()
        self._mask = torch.zeros((0, 0), dtype=torch.long, device=self.device)
