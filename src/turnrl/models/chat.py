"""Chat-template rendering and the token ledger built from template deltas.

Nothing is re-tokenized: the ledger keeps the exact token ids fed to (or sampled by) the
model. New messages are appended as a *template delta*: the text the chat template adds
for them, given everything before. So the concatenated ledger always decodes to what the
template produces for the whole conversation.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field

from transformers import PreTrainedTokenizerBase

from turnrl.types import Message


class ChatTemplateError(ValueError):
    """The tokenizer's chat template does not extend a conversation by appending text."""


def render(tokenizer: PreTrainedTokenizerBase, messages: list[Message], *,
           add_generation_prompt: bool, tools: list[dict] | None = None) -> str:
    """The chat template's text for ``messages`` (and the JSON tool schemas ``tools``, which
    templates with tool support put in the system prompt).

    Renderings are cached (LRU, keyed by the tokenizer, template and the messages' JSON): the
    episodes of a group render the same prompt and the same next-turn header, and Jinja
    rendering is the largest per-episode cost of a rollout with short replies. The key keeps
    each dict's key order, which the template sees (``tojson`` of tool-call arguments and
    tool schemas writes the keys in that order, as the model wrote or the env gave them).
    """
    if tokenizer.chat_template is None:
        raise ChatTemplateError(
            f"tokenizer {tokenizer.name_or_path!r} has no chat template; use an instruct/chat "
            "model or set tokenizer.chat_template"
        )
    try:
        key = json.dumps([messages, tools or None])  # key order kept: templates see it
    except (TypeError, ValueError):  # not JSON (an object in a message): render uncached
        return _render(tokenizer, messages, add_generation_prompt, tools)
    return _render_json(tokenizer, tokenizer.chat_template, key, add_generation_prompt)


@functools.lru_cache(maxsize=4096)
def _render_json(tokenizer: PreTrainedTokenizerBase, _template: str, key: str,
                 add_generation_prompt: bool) -> str:
    messages, tools = json.loads(key)
    return _render(tokenizer, messages, add_generation_prompt, tools)


def _render(tokenizer: PreTrainedTokenizerBase, messages: list[Message],
            add_generation_prompt: bool, tools: list[dict] | None) -> str:
    text = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=False, add_generation_prompt=add_generation_prompt
    )
    assert isinstance(text, str)
    return text


def encode(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    """Token ids of ``text`` without adding BOS/EOS (the template already has them); cached
    like :func:`render`."""
    return list(_encode(tokenizer, text))


@functools.lru_cache(maxsize=4096)
def _encode(tokenizer: PreTrainedTokenizerBase, text: str) -> tuple[int, ...]:
    return tuple(tokenizer.encode(text, add_special_tokens=False))


@dataclass
class TemplateLedger:
    """Grows a conversation's token ledger turn by turn.

    ``token_ids``, ``loss_mask``, ``logprobs`` and ``turn_index`` always have equal length;
    ``text`` is the decoded ledger, which must stay a prefix of the template's rendering.
    """

    tokenizer: PreTrainedTokenizerBase
    messages: list[Message] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    turn_index: list[int] = field(default_factory=list)
    text: str = ""
    tools: list[dict] | None = None  # JSON tool schemas rendered by the template (fixed)

    def delta(self, messages: list[Message], *,
              add_generation_prompt: bool) -> tuple[str, list[int]]:
        """The template's text and the new token ids if ``messages`` were appended (no change)."""
        conversation = self.messages + messages
        full = render(self.tokenizer, conversation, add_generation_prompt=add_generation_prompt,
                      tools=self.tools)
        if not full.startswith(self.text):
            raise ChatTemplateError(
                "the chat template does not render the conversation as an extension of its "
                f"previous rendering (after {len(conversation)} messages); turnrl needs an "
                "append-only template. Previous ends with "
                f"{self.text[-60:]!r}, new rendering has "
                f"{full[max(len(self.text) - 60, 0):len(self.text)]!r}"
            )
        return full, encode(self.tokenizer, full[len(self.text):])

    def add_messages(self, messages: list[Message], *, turn: int,
                     add_generation_prompt: bool) -> list[int]:
        """Append non-sampled messages (prompt, observation, tool output) as a template delta;
        with ``add_generation_prompt`` also the header of the next assistant turn."""
        full, delta = self.delta(messages, add_generation_prompt=add_generation_prompt)
        self.commit(messages, full, delta, turn=turn)
        return delta

    def commit(self, messages: list[Message], full: str, delta: list[int], *,
               turn: int) -> None:
        """Append what :meth:`delta` returned for ``messages`` (without rendering again)."""
        self.messages.extend(messages)
        self._extend(delta, mask=0, logprobs=None, turn=turn)
        self.text = full

    def add_sampled(self, token_ids: list[int], logprobs: list[float] | None, *, turn: int,
                    eos_token_id: int | None, mask: int = 1) -> str:
        """Append the agent's sampled tokens; returns the assistant message content.
        ``mask=0`` keeps them out of the loss (an SFT reply shown as context only)."""
        body = token_ids[:-1] if token_ids and token_ids[-1] == eos_token_id else token_ids
        content = self.tokenizer.decode(body, skip_special_tokens=False)
        self._extend(token_ids, mask=mask, logprobs=logprobs, turn=turn)
        self.text += self.tokenizer.decode(token_ids, skip_special_tokens=False)
        self.messages.append({"role": "assistant", "content": content})
        return content

    def _extend(self, ids: list[int], *, mask: int, logprobs: list[float] | None,
                turn: int) -> None:
        self.token_ids.extend(ids)
        self.loss_mask.extend([mask] * len(ids))
        self.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.turn_index.extend([turn] * len(ids))


def ledger_from_messages(tokenizer: PreTrainedTokenizerBase, messages: list[Message], *,
                         tools: list[dict] | None = None) -> TemplateLedger:
    """Ledger of a finished conversation (for SFT): assistant contents + EOS are 'sampled'.

    Assistant turns are tokenized as the model would have produced them: the content's
    tokens followed by the EOS token; everything else is a template delta with mask 0. An
    assistant message with ``"weight": 0`` (the per-message flag of axolotl's chat datasets)
    is context only: its tokens get mask 0 too.
    """
    ledger = TemplateLedger(tokenizer, tools=tools)
    pending: list[Message] = []
    turn = -1
    for message in messages:
        if message["role"] != "assistant":
            pending.append(message)
            continue
        ledger.add_messages(pending, turn=turn, add_generation_prompt=True)
        pending = []
        turn += 1
        ids = [*encode(tokenizer, message["content"]), tokenizer.eos_token_id]
        ledger.add_sampled(ids, None, turn=turn, eos_token_id=tokenizer.eos_token_id,
                           mask=0 if message.get("weight", 1) == 0 else 1)
    if pending or ledger.messages:
        ledger.add_messages(pending, turn=turn, add_generation_prompt=False)
    return ledger
