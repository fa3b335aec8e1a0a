"""Token-exact capture of an agent program's model calls.

An agent sends its whole conversation with every call. The capture keeps, per agent run (a
:class:`Session`), the exact token ids the model was fed and sampled, in *segments*: token
ledgers (:class:`~turnrl.models.chat.TemplateLedger`) that grow as the env runner's do.

A call **continues** a segment when its messages start with everything that segment has seen
(the messages of its last call and the reply the agent was given, echoed back unchanged) and
the chat template renders the longer conversation as an extension of the segment's text: only
the new messages' template delta is encoded, and the earlier replies stay the tokens that
were sampled. Otherwise (the agent edited, dropped or summarised messages, changed its tools,
or the template re-renders an earlier turn differently, e.g. strips a thinking block or
writes a tool call with other spacing than the model did) the call **starts a new segment**
whose prompt is the template's rendering of the messages it sent. Each segment is trained on
exactly the context its replies were sampled in; nothing is ever re-tokenized.

A call may continue any segment whose latest reply it echoes (the most recent first), so
branches work: ``n > 1`` choices (one segment per choice) and concurrent calls of one run.
A segment holds the calls of one model name only (``Segment.model``): an agent program with
several roles served by separate policies (``multi.policies``) gives each its own ledgers.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

from jinja2 import TemplateError
from transformers import PreTrainedTokenizerBase

from turnrl.models.chat import ChatTemplateError, TemplateLedger
from turnrl.types import Message

__all__ = ["RenderError", "Segment", "Session", "Turn"]


class RenderError(ValueError):
    """The chat template refuses the messages (e.g. parallel tool calls for Llama 3.1)."""


@dataclass
class Segment:
    """One token ledger of a session, and what its next call must echo to continue it.

    ``seen`` is the conversation (normalised messages) the segment's last call sent followed
    by the reply it got; ``calls`` are the session-wide indices of the calls sampled in it
    (one per turn, in order); ``pending`` is True while a call on it awaits its reply.
    """

    ledger: TemplateLedger
    tools: list[dict] | None
    seen: list[dict] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    pending: bool = False
    versions: list[int] = field(default_factory=list)  # engine weight version per sampled token
    model: str | None = None  # the model (policy) name its calls asked for
    tool_calls: list[list[str]] = field(default_factory=list)  # per sampled reply: its calls
    choices: list[int] = field(default_factory=list)  # per call: the choice it holds (n > 1)


@dataclass(frozen=True)
class Turn:
    """A call being served: the prompt ids to sample from, the segment it grows and the
    session-wide index of the call."""

    prompt_ids: list[int]
    segment: Segment
    call: int
    messages: list[dict]
    cached_tokens: int  # prompt tokens the segment already held (reused verbatim)
    messages_before: int = 0  # the segment's message count before this call extended it
    text_before: str = ""  # and its text


class Session:
    """The capture of one agent run: its segments, in the order they were started.

    Args:
        tokenizer: renders messages with its chat template and encodes the deltas.
        eos_token_id: ends a sampled reply (not part of the message's content).
        seed: the run's sampling seed (:meth:`call_seed`); None: the engine draws each
            call's.

    Thread-safe: an agent may call the model from several threads at once.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, *, eos_token_id: int | None,
                 seed: int | None = None) -> None:
        self.tokenizer = tokenizer
        self.eos_token_id = eos_token_id
        self.seed = seed
        self.segments: list[Segment] = []
        self.calls = 0  # calls begun (their indices seed their samples), refused ones too
        self.answered: list[int] = []  # the calls answered, in the order they were answered
        self.response_ids: dict[str, int] = {}  # a reply's id -> its call
        self.in_flight = 0
        self.overlapped = False  # two calls were in flight at once at some point
        self._lock = threading.Lock()

    def call_seed(self, call: int) -> int | None:
        """The sampling seed of call number ``call`` of a seeded run: its samples then
        depend on the run and the call only, not on when its requests reached the engine or
        which others shared its batch (None for an unseeded run)."""
        return None if self.seed is None else hash((self.seed, call)) % 2**62

    def begin(self, messages: list[dict], tools: list[dict] | None,
              model: str | None = None) -> Turn:
        """The prompt of a call to ``model`` that sends ``messages`` (normalised, as the agent
        sent them) with ``tools``: continuing the latest segment of the same model it
        extends, else a new segment (a segment holds the calls of one model only, so each
        policy's ledger has only its own samples)."""
        with self._lock:
            call, self.calls = self.calls, self.calls + 1
            self._started()
            for segment in reversed(self.segments):
                if segment.pending or segment.tools != tools or not segment.seen or \
                        segment.model != model:
                    continue
                n = len(segment.seen)
                if len(messages) <= n or messages[:n] != segment.seen:
                    continue
                before = (len(segment.ledger.messages), segment.ledger.text)
                try:
                    prompt, cached = self._extend(segment, messages[n:])
                except (ChatTemplateError, TemplateError):  # not an extension (or unrenderable)
                    continue
                segment.pending = True
                return Turn(prompt, segment, call, messages, cached, *before)
            ledger = TemplateLedger(self.tokenizer, tools=tools)
            try:
                ledger.add_messages(_as_messages(messages), turn=-1, add_generation_prompt=True)
            except (ChatTemplateError, TemplateError) as error:
                raise RenderError(f"the model's chat template cannot render these messages: "
                                  f"{error}") from None
            segment = Segment(ledger, copy.deepcopy(tools), pending=True, model=model)
            self.segments.append(segment)
            return Turn(list(ledger.token_ids), segment, call, messages, 0)

    def begin_raw(self, prompt: list[int], model: str | None = None) -> Turn:
        """The prompt of a ``/v1/completions`` call to ``model``: ``prompt`` as given (no
        chat template), always a segment of its own."""
        with self._lock:
            call, self.calls = self.calls, self.calls + 1
            self._started()
            ledger = TemplateLedger(self.tokenizer)
            ledger.token_ids, ledger.loss_mask = list(prompt), [0] * len(prompt)
            ledger.logprobs, ledger.turn_index = [0.0] * len(prompt), [-1] * len(prompt)
            ledger.text = self.tokenizer.decode(prompt, skip_special_tokens=False)
            segment = Segment(ledger, None, pending=True, model=model)
            self.segments.append(segment)
            return Turn(list(prompt), segment, call, [], 0)

    def _started(self) -> None:
        self.in_flight += 1
        self.overlapped |= self.in_flight > 1

    def _extend(self, segment: Segment, new: list[dict]) -> tuple[list[int], int]:
        """Append the template delta of ``new`` messages (and the next assistant header) to
        ``segment``; raises :class:`ChatTemplateError` (nothing changed) when the template
        does not render the conversation as an extension."""
        ledger = segment.ledger
        cached = len(ledger.token_ids)
        full, delta = ledger.delta(_as_messages(new), add_generation_prompt=True)
        ledger.commit(_as_messages(new), full, delta, turn=len(segment.calls) - 1)
        return list(ledger.token_ids), cached

    def finish(self, turn: Turn, sampled: list[list[int]], logprobs: list[list[float]],
               replies: list[dict | None], versions: list[list[int] | None] | None = None,
               response_id: str | None = None) -> None:
        """Record the call's sampled choices (token ids with the log-probs they were sampled
        with, and the normalised reply message the agent was given for each; None for a
        ``/v1/completions`` call, which is never continued). The first choice grows
        ``turn.segment``; each further choice gets a segment of its own (a copy of the
        context it was sampled in). ``versions``: the engine's weight version of each sampled
        token, per choice (None: the engine keeps none). The call counts as answered (its
        ``response_id``, the id its reply carries, keys its reward in ``call_rewards``)."""
        with self._lock:
            self.in_flight -= 1
            self.answered.append(turn.call)
            if response_id is not None:
                self.response_ids[response_id] = turn.call
            base = _fork(turn.segment) if len(sampled) > 1 else None
            for i, (ids, lps, reply) in enumerate(zip(sampled, logprobs, replies, strict=True)):
                if i == 0:
                    segment = turn.segment
                else:
                    assert base is not None
                    segment = _fork(base)
                    self.segments.append(segment)
                segment.ledger.add_sampled(ids, lps, turn=len(segment.calls),
                                           eos_token_id=self.eos_token_id)
                stamps = versions[i] if versions is not None else None
                if stamps is not None:
                    segment.versions += stamps
                segment.tool_calls.append(called(reply))
                if reply is not None:  # the next call renders the reply as the agent echoes
                    segment.ledger.messages[-1] = reply  # type: ignore[assignment]
                    segment.seen = [*turn.messages, reply]
                segment.calls.append(turn.call)
                segment.choices.append(i)
                segment.pending = False

    def abandon(self, turn: Turn) -> None:
        """A call that failed before sampling: a segment it continued is put back as it was
        (and may be continued again); a segment it started is dropped. A refused call is
        never answered, so it never counts in ``call_rewards``."""
        with self._lock:
            self.in_flight -= 1
            segment = turn.segment
            segment.pending = False
            if not segment.calls:
                if segment in self.segments:
                    self.segments.remove(segment)
                return
            ledger, n = segment.ledger, turn.cached_tokens
            del ledger.token_ids[n:], ledger.loss_mask[n:], ledger.logprobs[n:]
            del ledger.turn_index[n:], ledger.messages[turn.messages_before:]
            ledger.text = turn.text_before

    def sampled_segments(self) -> list[Segment]:
        """The segments with at least one sampled reply, in the order they were started."""
        return [s for s in self.segments if s.calls]


def called(reply: dict | None) -> list[str]:
    """The names of the tools a reply calls (its OpenAI ``tool_calls``)."""
    calls = (reply or {}).get("tool_calls") or []
    return [str((c.get("function") or {}).get("name", "")) for c in calls if isinstance(c, dict)]


def _fork(segment: Segment) -> Segment:
    """A copy of ``segment`` that grows on its own (the tokenizer is shared)."""
    ledger = segment.ledger
    return Segment(
        TemplateLedger(ledger.tokenizer, messages=list(ledger.messages),
                       token_ids=list(ledger.token_ids), loss_mask=list(ledger.loss_mask),
                       logprobs=list(ledger.logprobs), turn_index=list(ledger.turn_index),
                       text=ledger.text, tools=ledger.tools),
        segment.tools, list(segment.seen), list(segment.calls), segment.pending,
        list(segment.versions), segment.model, [list(c) for c in segment.tool_calls],
        list(segment.choices))


def _as_messages(messages: list[dict[str, Any]]) -> list[Message]:
    return messages  # type: ignore[return-value]  # normalised: role/content and extras
