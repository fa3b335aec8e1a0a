"""A sampled completion as the reply an OpenAI client gets: stop strings and tool calls.

Both act on the text only after sampling, and the tokens a reply keeps are exactly a prefix
of the ones sampled: a stop string ends the reply at the token that completes it (the tokens
after it were never part of any context, so they are dropped, as if decoding had stopped
there); tool calls are read out of the text (the tokens stay as sampled).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from turnrl.envs.tools.parsing import find_calls

__all__ = ["Reply", "cut_at_stop", "reply_message", "split_tool_calls"]

_DECODER = json.JSONDecoder(strict=False)  # as the call parser reads JSON


@dataclass(frozen=True)
class Reply:
    """One choice: the tokens kept (with their log-probs), the client's text and tool calls,
    and why it ended (``"stop"``, ``"length"`` or ``"tool_calls"``)."""

    token_ids: list[int]
    logprobs: list[float]
    text: str
    tool_calls: list[dict] | None
    finish_reason: str
    versions: list[int] | None = None  # the engine's weight version of each kept token
    stop: str | None = None  # the stop string that ended it (None: none did)


def cut_at_stop(tokenizer: PreTrainedTokenizerBase, token_ids: list[int], eos_token_id: int | None,
                stops: tuple[str, ...]) -> tuple[int, str, str | None]:
    """Where a reply ends: ``(n, text, stop)`` with ``n`` the number of sampled tokens it
    keeps, ``text`` its content (without the EOS token and without the stop string) and
    ``stop`` the stop string that ended it (None: none did).

    The kept tokens are the shortest prefix whose text contains a stop string (the earliest
    one in the text), else all of them."""
    body = token_ids[:-1] if token_ids and token_ids[-1] == eos_token_id else token_ids
    text = tokenizer.decode(body, skip_special_tokens=False)
    hits = [(text.find(stop), stop) for stop in stops if stop and stop in text]
    if not hits:
        return len(token_ids), text, None
    at, stop = min(hits)
    need = at + len(stop)
    for n in range(1, len(body) + 1):  # the first prefix whose text holds the stop string
        if len(tokenizer.decode(body[:n], skip_special_tokens=False)) >= need:
            return n, text[:at], stop
    return len(body), text[:at], stop


def split_tool_calls(text: str, tools: list[dict] | None) -> tuple[str, list[dict] | None]:
    """The reply's content and its OpenAI ``tool_calls`` (``None`` when there are none).

    Calls are read in the JSON format tool-aware chat templates teach (``<tool_call>{"name":
    ..., "arguments": {...}}</tool_call>`` or the bare object, :mod:`turnrl.envs.tools.parsing`);
    only calls of a tool in ``tools`` whose JSON reads cleanly count, and their text is taken
    out of the content, and the content right-stripped (so a streamed reply can send the text
    before a call as it comes, :mod:`turnrl.agents.streaming`). A reply whose calls cannot be
    read keeps its whole text as content.
    A call keeps the ``"id"`` the model wrote in it (Mistral), else it gets a fresh one.
    """
    if not tools:
        return text, None
    names = {tool["function"]["name"] for tool in tools}
    calls = [c for c in find_calls(text, "json", names)
             if c.problem is None and c.name in names and isinstance(c.arguments, dict)]
    if not calls:
        return text, None
    content, at = [], 0
    for call in calls:
        content.append(text[at:call.start])
        at = call.end
    content.append(text[at:])
    ids: list[str] = []
    for call in calls:
        ids.append(_call_id(text[call.start:call.end], ids))
    tool_calls = [{"id": call_id, "type": "function",
                   "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                  for call_id, c in zip(ids, calls, strict=True)]
    return "".join(content).rstrip(), tool_calls


def _call_id(written: str, taken: list[str]) -> str:
    """The ``"id"`` the model wrote in a call's JSON (Mistral's template teaches it to write
    one, and renders the echoed call with it: another id would change the text the model
    sampled), when it is a string not used by an earlier call of the reply; else a fresh id
    of 9 letters and digits (the ids Mistral's chat template accepts; any string is OpenAI's)."""
    at = written.find("{")
    try:
        obj = _DECODER.raw_decode(written, at)[0] if at >= 0 else None
    except (RecursionError, ValueError):
        obj = None
    call_id = obj.get("id") if isinstance(obj, dict) else None
    if isinstance(call_id, str) and call_id and call_id not in taken:
        return call_id
    return uuid.uuid4().hex[:9]


def reply_message(reply: Reply) -> dict:
    """The assistant message of ``reply`` as the client receives it (and echoes it back):
    ``content`` None when the reply is only tool calls."""
    message: dict = {"role": "assistant",
                     "content": reply.text if (reply.text or not reply.tool_calls) else None}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    return message
