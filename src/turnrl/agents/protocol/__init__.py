"""The OpenAI wire format of turnrl's agent endpoint: requests checked and typed, replies built.

An agent program written against the ``openai`` SDK talks to turnrl's server as it would to
OpenAI. This module is the pure translation layer between that JSON and typed values; it does
no I/O and knows nothing of engines or tokenizers:

- :func:`parse_chat_request` and :func:`parse_completion_request` turn a request body
  (``/v1/chat/completions``, ``/v1/completions``) into a frozen :class:`ChatRequest` or
  :class:`CompletionRequest`, or raise :class:`OpenAIError` (a 400 whose ``body()`` is the JSON
  OpenAI itself would send, naming the parameter, what was given and what is allowed);
- :func:`chat_completion`, :func:`completion` and :func:`models_list` build the replies;
  :class:`ChatStream` and :class:`CompletionStream` their server-sent events as the pieces
  come (:func:`chat_chunks`, :func:`completion_chunks`: all at once), from :class:`Choice`
  and :class:`Usage`.

Message normal form
-------------------
The server renders ``ChatRequest.messages`` with a Hugging Face chat template and compares the
messages of successive calls, so they are normalised deterministically (same input, same dicts):

- ``role`` is one of ``system``, ``user``, ``assistant``, ``tool`` (``developer`` becomes
  ``system``);
- ``content`` is a string: a list of ``{"type": "text"}`` parts is joined without separator;
  ``null`` becomes ``""`` on an assistant message that has tool calls;
- an assistant's ``tool_calls`` (kept only when non-empty) are
  ``{"id", "type": "function", "function": {"name", "arguments": dict}}``, the ``arguments``
  JSON text parsed into an object, as templates (Qwen, Llama) apply ``tojson`` to it;
- ``name``, a tool message's ``tool_call_id`` and an assistant's ``reasoning_content`` are kept;
  every other key (``refusal``, ``annotations``, ``audio``, ...) is dropped.

Sampling parameters that would change the distribution sampled from (penalties, logit bias,
structured outputs) are refused rather than ignored: the tokens sampled are trained on with
the policy's own logprobs, so they must come from the policy unchanged.

Parameters whose value is ``null`` count as not given, as in OpenAI's API.

Modules: :mod:`~turnrl.agents.protocol.values` (the error, the limits, the typed requests),
:mod:`~turnrl.agents.protocol.params` (one parameter read with a strict type check),
:mod:`~turnrl.agents.protocol.messages` (messages and tools in normal form),
:mod:`~turnrl.agents.protocol.bodies` (the two request bodies as pydantic models, each field
carrying its check), :mod:`~turnrl.agents.protocol.requests` (the two parsers) and
:mod:`~turnrl.agents.protocol.replies` (the replies and their server-sent events).
"""

from turnrl.agents.protocol.messages import normalize_message
from turnrl.agents.protocol.replies import (
    ChatStream,
    Choice,
    CompletionStream,
    Usage,
    chat_chunks,
    chat_completion,
    completion,
    completion_chunks,
    models_list,
)
from turnrl.agents.protocol.requests import parse_chat_request, parse_completion_request
from turnrl.agents.protocol.values import ChatRequest, CompletionRequest, Limits, OpenAIError

__all__ = [
    "ChatRequest",
    "ChatStream",
    "Choice",
    "CompletionRequest",
    "CompletionStream",
    "Limits",
    "OpenAIError",
    "Usage",
    "chat_chunks",
    "chat_completion",
    "completion",
    "completion_chunks",
    "models_list",
    "normalize_message",
    "parse_chat_request",
    "parse_completion_request",
]
