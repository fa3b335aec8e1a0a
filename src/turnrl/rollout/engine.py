"""The Engine protocol: token-in / token-out generation with sampled-token log-probs."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one completion.

    ``temperature == 0`` is greedy decoding. Recorded log-probs are those of the
    temperature-scaled distribution ``log_softmax(logits / temperature)`` *before* top-p
    truncation, i.e. what the learner recomputes with the same temperature.

    ``seed`` makes one request's samples reproducible whatever else is decoded beside it
    (as in vLLM); ``None`` draws a seed from the engine's own generator.
    """

    max_new_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)
    seed: int | None = None


@dataclass
class Completion:
    """One generated continuation."""

    token_ids: list[int]  # sampled tokens, including the stop token when one was sampled
    logprobs: list[float]  # log-prob of each sampled token under the behaviour policy
    finish_reason: Literal["stop", "length"]
    # the engine's weight version when each token was sampled (None: the engine keeps none);
    # one completion can span a weight update (a partial rollout)
    versions: list[int] | None = None


TokenSink = Callable[[list[int], list[float]], None]
"""Called with the tokens a request sampled in one engine step and their log-probs, as they
are sampled (on the engine's event loop; the stop token included): what a streamed reply
sends, and what a cancelled one had sampled."""


@runtime_checkable
class Engine(Protocol):
    """Generates continuations of token-id prompts. Implementations batch pending requests.

    An engine that can stream takes ``on_tokens`` (a :data:`TokenSink`) in ``generate``
    (:func:`streams`); the built-in ones do. Cancelling the awaiting task abandons the
    request: the engine stops decoding it at its next step. An engine may also offer
    ``submit`` (the same arguments, returning the request's future at once, without a loop
    round before it is queued): :func:`submit` uses it where it exists.
    """

    async def generate(self, prompt_ids: list[int], params: SamplingParams, *,
                       session: str | None = None) -> Completion: ...

    def load_weights(self, model: torch.nn.Module) -> None: ...
    # (engines that serve several learner versions also carry ``version: int``, stamped on
    # every sampled token: Completion.versions)

    def end_session(self, session: str) -> None:
        """The episode ``session`` is over: drop any state kept for it (e.g. its KV cache)."""
        ...


@runtime_checkable
class TrainingEngine(Engine, Protocol):
    """An engine a training run drives (the built-in ``hf`` and ``vllm`` engines).

    ``version`` is the learner version of the weights it serves (stamped on every sampled
    token); ``generator`` seeds requests that bring no seed (checkpoints save its state).
    """

    version: int
    generator: torch.Generator

    def sleep(self) -> None:
        """Free what the learner's update needs (a colocated GPU engine's memory) until the
        next :meth:`load_weights`; a no-op where nothing is to be freed."""
        ...

    def close(self) -> None:
        """Release the engine (its memory, processes and files); it serves no more."""
        ...

    def step_metrics(self) -> dict[str, float]:
        """Counters since the last call (``rollout/prefix_cache_hit_rate``: the fraction of
        prompt tokens whose keys and values were reused instead of computed)."""
        ...


def streams(engine: object) -> bool:
    """Whether ``engine.generate`` takes ``on_tokens`` (it reports tokens as they are sampled);
    an engine that does not is streamed as one piece when its reply is done."""
    try:
        return "on_tokens" in inspect.signature(engine.generate).parameters  # type: ignore[attr-defined]
    except (AttributeError, TypeError, ValueError):
        return False


def submit(engine: Engine, prompt_ids: list[int], params: SamplingParams, *,
           session: str | None = None,
           on_tokens: TokenSink | None = None) -> asyncio.Future[Completion]:
    """``engine``'s request as a future, queued at once where the engine can
    (``engine.submit``, as the built-in engines do): a request made between two engine steps
    joins the next one, where a task of ``generate`` would first run a loop round later and
    may miss it. Other engines: a task of ``generate``. Cancelling the future abandons the
    request. ``on_tokens`` is passed only when given (an engine that does not stream takes
    none)."""
    kwargs: dict[str, Any] = {"session": session}
    if on_tokens is not None:
        kwargs["on_tokens"] = on_tokens
    queue_now = getattr(engine, "submit", None)
    if queue_now is not None:
        return queue_now(prompt_ids, params, **kwargs)
    return asyncio.ensure_future(engine.generate(prompt_ids, params, **kwargs))
