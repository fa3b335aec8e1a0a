"""What of a reply can be sent while it is being sampled.

A streamed reply must add up, delta by delta, to exactly the content the whole reply has
(:func:`turnrl.agents.replies.cut_at_stop` and :func:`~turnrl.agents.replies.split_tool_calls`
on the finished tokens): the client echoes that content back in its next call, and the
capture continues the episode's token ledger only when the echo matches what it recorded.
So :class:`TextStream` sends, after each sampled token, the longest text the finished reply
is sure to begin with, and holds back:

- a trailing ``U+FFFD`` (a character whose UTF-8 bytes are not all sampled yet);
- trailing whitespace (the tokenizer's clean-up joins ``" ."`` into ``"."`` once the next
  token comes; a tool-call reply's content is right-stripped);
- a suffix that may be the start of a stop string, and everything from a stop string on;
- with tools, everything from the first character that may open a tool call (``<``, ``{``
  or a code fence's backtick): calls are read out of the finished text, and what is not a
  call comes at the end.

What was held back is sent when the reply is done (:meth:`TextStream.rest`).
"""

from __future__ import annotations

import logging

from transformers import PreTrainedTokenizerBase

__all__ = ["CALL_OPENERS", "TextStream"]

log = logging.getLogger(__name__)

CALL_OPENERS = "<{`"  # a tool call in the text begins with one of these (turnrl.envs.tools.parsing)


class TextStream:
    """The text deltas of one reply as its tokens come.

    Args:
        tokenizer: decodes the tokens (as the finished reply is decoded).
        eos_token_id: the end-of-sequence token (never part of the text).
        stops: the request's stop strings.
        tools: whether the request offered tools (the reply may hold calls).
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, eos_token_id: int | None,
                 stops: tuple[str, ...], tools: bool) -> None:
        self.tokenizer, self.eos_token_id = tokenizer, eos_token_id
        self.stops = tuple(stop for stop in stops if stop)
        self.tools = tools
        self.tokens: list[int] = []
        self.sent = ""

    def push(self, tokens: list[int]) -> str:
        """Take newly sampled ``tokens``; return the text now safe to send ('' if none)."""
        self.tokens += [t for t in tokens if t != self.eos_token_id]
        safe = self.safe(self.tokenizer.decode(self.tokens, skip_special_tokens=False))
        if len(safe) <= len(self.sent) or not safe.startswith(self.sent):
            return ""
        delta, self.sent = safe[len(self.sent):], safe
        return delta

    def safe(self, text: str) -> str:
        """The part of ``text`` (the reply so far) that the finished reply's content starts
        with, whatever tokens come next."""
        text = text.rstrip("\ufffd")
        hits = [text.find(stop) for stop in self.stops if stop in text]
        if hits:
            text = text[:min(hits)]
        else:  # hold back a tail that may grow into a stop string
            hold = max((k for stop in self.stops for k in range(1, len(stop))
                        if text.endswith(stop[:k])), default=0)
            text = text[:len(text) - hold]
        if self.tools:
            openers = [at for at in (text.find(c) for c in CALL_OPENERS) if at >= 0]
            if openers:
                text = text[:min(openers)]
        return text.rstrip()

    def rest(self, content: str) -> str:
        """What is left to send of the finished reply's ``content``."""
        if content.startswith(self.sent):
            return content[len(self.sent):]
        # cannot happen for the tokenizers turnrl knows; the client's text is then off
        log.warning("a streamed reply sent %r, which its content %r does not begin with",
                    self.sent, content)
        return ""
