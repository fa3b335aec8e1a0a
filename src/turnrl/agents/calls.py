"""One model call of an agent: its samples drawn whole or streamed as they are sampled, its
replies recorded in the capture session, or nothing recorded if it does not finish.

Every API the endpoint serves (chat completions, completions, the Responses API, Anthropic's
Messages API) reads its request into the same :class:`CallSpec` (the prompt's token ids and
how to sample) and hands it to a :class:`Call`; only the JSON around the replies differs.

- :meth:`Call.run` samples the ``n`` replies and returns them;
- :meth:`Call.deltas` yields ``(choice index, text)`` as tokens are sampled (engines that take
  ``on_tokens``, :func:`turnrl.rollout.engine.streams`; others give everything at the end),
  then :attr:`Call.replies` holds the replies and :meth:`Call.rest` what was held back.

A call that ends early (the client hung up, the handler was cancelled, the engine failed)
cancels its generation (the engine stops decoding it at its next step) and is abandoned:
its turn leaves the session as it was, and nothing of it is trained. With ``keep_partial``
(``agent.train_partial``) a call cancelled by its client keeps what each choice had sampled
(from an engine that reports its tokens) as its reply, finish reason ``length``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from turnrl.agents.capture import Session, Turn
from turnrl.agents.protocol import normalize_message
from turnrl.agents.replies import Reply, cut_at_stop, reply_message, split_tool_calls
from turnrl.agents.streaming import TextStream
from turnrl.rollout.engine import Completion, Engine, SamplingParams, streams, submit

__all__ = ["Call", "CallSpec", "to_reply"]


@dataclass(frozen=True)
class CallSpec:
    """What one call samples: ``n`` continuations of ``prompt`` (token ids) from ``model``'s
    engine, at most ``max_tokens`` each, choice ``i`` seeded ``seed + i`` (None: the engine's
    generator); the first choice continues the engine's KV session ``engine_session``."""

    prompt: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    n: int
    model: str
    stops: tuple[str, ...] = ()
    tools: list[dict] | None = None  # the tools the reply may call (None: no tool calls)
    engine_session: str | None = None


def to_reply(tokenizer: PreTrainedTokenizerBase, eos_token_id: int | None,
             sampled: Completion, stops: tuple[str, ...], tools: list[dict] | None) -> Reply:
    """A sampled completion as the client's reply: cut at the first stop string, its tool
    calls read out (finish reason ``tool_calls`` when a call ended it)."""
    n, text, stop = cut_at_stop(tokenizer, sampled.token_ids, eos_token_id, stops)
    finish: str = "stop" if stop is not None else sampled.finish_reason
    content, tool_calls = split_tool_calls(text, tools)
    if tool_calls and finish == "stop":
        finish = "tool_calls"
    versions = sampled.versions[:n] if sampled.versions is not None else None
    return Reply(sampled.token_ids[:n], sampled.logprobs[:n], content, tool_calls, finish,
                 versions, stop)


class Call:
    """One call being answered.

    Args:
        engines: the served engines by model name (``spec.model`` picks one).
        tokenizer, eos_token_id: decode the replies.
        spec: what to sample.
        session, turn: the capture session and the turn the call began in it (None: nothing
            is recorded, as for ``turnrl serve`` or a raw completion outside a session).
        response_id: the id the reply carries (keys the call's reward).
        messages: whether the replies are chat messages (a raw completion's are not, and are
            never continued).
        keep_partial: a call its client cancels keeps what it had sampled (see above).
    """

    def __init__(self, engines: Mapping[str, Engine], tokenizer: PreTrainedTokenizerBase,
                 eos_token_id: int | None, spec: CallSpec, *, session: Session | None,
                 turn: Turn | None, response_id: str, messages: bool = True,
                 keep_partial: bool = False) -> None:
        self.engine = engines[spec.model]
        self.tokenizer, self.eos_token_id = tokenizer, eos_token_id
        self.spec, self.session, self.turn = spec, session, turn
        self.response_id, self.messages = response_id, messages
        self.live = streams(self.engine)  # the engine reports tokens as they are sampled
        self.keep_partial = keep_partial and self.live
        self.streams = [TextStream(tokenizer, eos_token_id, spec.stops, bool(spec.tools))
                        for _ in range(spec.n)]
        # what each choice has sampled so far: (token ids, log-probs)
        self.sampled: list[tuple[list[int], list[float]]] = [([], []) for _ in range(spec.n)]
        self.replies: list[Reply] | None = None
        self._futures: list[asyncio.Future] = []  # each choice's request, once started
        self._queue: asyncio.Queue[tuple[int, list[int] | None]] | None = None
        self._stopped = False

    def _params(self) -> list[SamplingParams]:
        s = self.spec
        return [SamplingParams(max_new_tokens=s.max_tokens, temperature=s.temperature,
                               top_p=s.top_p, seed=None if s.seed is None else s.seed + i)
                for i in range(s.n)]

    def _sink(self, queue: asyncio.Queue[tuple[int, list[int] | None]] | None, index: int,
              tokens: list[int], logprobs: list[float]) -> None:
        self.sampled[index][0].extend(tokens)
        self.sampled[index][1].extend(logprobs)
        if queue is not None:
            queue.put_nowait((index, tokens))

    def _generate(self, index: int, params: SamplingParams,
                  queue: asyncio.Queue[tuple[int, list[int] | None]] | None) -> asyncio.Future:
        on_tokens = None
        if self.live and (queue is not None or self.keep_partial):
            on_tokens = functools.partial(self._sink, queue, index)
        return submit(self.engine, self.spec.prompt, params, session=self._session(index),
                      on_tokens=on_tokens)

    def start(self, *, live: bool = False) -> None:
        """Queue the call's choices in the engine now (once; :meth:`run` and :meth:`deltas`
        start it if nobody did): a call started by its request's handler joins the engine's
        next step. ``live``: its tokens are reported as they are sampled, for :meth:`deltas`."""
        if self._futures:
            return
        self._queue = asyncio.Queue() if live else None
        for i, params in enumerate(self._params()):
            future = self._generate(i, params, self._queue)
            if self._queue is not None:
                future.add_done_callback(functools.partial(_done, self._queue, i))
            self._futures.append(future)

    async def run(self) -> list[Reply]:
        """Sample every choice whole; record and return the replies."""
        self.start()
        futures = self._futures
        try:
            completions = ([await futures[0]] if len(futures) == 1
                           else await asyncio.gather(*futures))
        except BaseException as error:
            await self._stop(cancelled=isinstance(error, asyncio.CancelledError))
            raise
        return self._finish(list(completions))

    async def deltas(self) -> AsyncIterator[tuple[int, str]]:
        """``(choice index, text)`` as it is sampled; once exhausted, :attr:`replies` is set
        and the call recorded. Closing it early cancels the generation."""
        self.start(live=True)
        queue, futures = self._queue, self._futures
        assert queue is not None, "deltas() of a call started without live=True"
        try:
            done = 0
            while done < len(futures):
                i, tokens = await queue.get()
                if tokens is None:
                    done += 1
                    continue
                delta = self.streams[i].push(tokens)
                if delta:
                    yield i, delta
            completions = [future.result() for future in futures]
        except BaseException as error:
            await self._stop(cancelled=isinstance(
                error, (asyncio.CancelledError, GeneratorExit)))
            raise
        self._finish(completions)

    async def close(self) -> None:
        """The call's reader is gone (a stream closed, maybe before it began): a call not
        yet finished ends as one its client cancelled (:meth:`_stop`)."""
        if self._futures and self.replies is None:
            await self._stop(cancelled=True)

    async def _stop(self, *, cancelled: bool) -> None:
        """The call ends unfinished (once): cancel its generation; keep what it sampled (a
        call its client cancelled, with ``keep_partial``) or abandon it."""
        if self._stopped:
            return
        self._stopped = True
        for future in self._futures:
            future.cancel()
        for future in self._futures:  # let the engines see the cancellations
            with contextlib.suppress(BaseException):
                await future
        if cancelled and self.keep_partial and any(ids for ids, _ in self.sampled):
            self._finish([Completion(list(ids), list(lps), "length")
                          for ids, lps in self.sampled])
        else:
            self.abandon()

    @property
    def cached_tokens(self) -> int:
        """The prompt tokens found in the engine's cache (0 outside a session)."""
        return self.turn.cached_tokens if self.turn is not None else 0

    def rest(self, index: int) -> str:
        """The text of choice ``index`` not yet yielded by :meth:`deltas` (after it ends)."""
        assert self.replies is not None, "rest() is read once the call has finished"
        return self.streams[index].rest(self.replies[index].text)

    def abandon(self) -> None:
        """Leave the session as it was before the call (idempotent)."""
        if self.session is not None and self.turn is not None and self.replies is None:
            self.session.abandon(self.turn)
            self.turn = None

    def _session(self, index: int) -> str | None:
        return self.spec.engine_session if index == 0 else None

    def _finish(self, completions: list[Completion]) -> list[Reply]:
        s = self.spec
        replies = [to_reply(self.tokenizer, self.eos_token_id, c, s.stops, s.tools)
                   for c in completions]
        if self.session is not None and self.turn is not None:
            shown = [normalize_message(reply_message(r)) if self.messages else None
                     for r in replies]
            self.session.finish(self.turn, [r.token_ids for r in replies],
                                [r.logprobs for r in replies], shown,
                                [r.versions for r in replies], response_id=self.response_id)
        self.replies = replies
        return replies


def _done(queue: asyncio.Queue[tuple[int, list[int] | None]], index: int,
          _task: asyncio.Future) -> None:
    queue.put_nowait((index, None))
