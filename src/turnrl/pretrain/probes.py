"""Probes of what a base model can do with its context, on held-out examples.

Each probe draws ``n`` conversations from a corpus skill with probe-only seeds
(``random.Random(f"probe:{name}:{i}")``, a space the corpus's ``f"{seed}/{i}"`` never uses) and
scores the model on one assistant turn of each:

- ``copy@64``, ``copy@256``, ``copy@1024``: a 16-character string to copy after that many
  characters of filler; ``accuracy`` is the next-token accuracy over the copied characters
  (teacher-forced argmax, the copy's own measure), ``exact`` the share copied whole;
- ``lookup``, ``choose``, ``memory``, ``arithmetic``, ``count_compare``: ``exact``, the share of
  answers that greedy decoding writes exactly (every answer token, end of turn included, is the
  argmax given the ones before it, which is what greedy decoding produces);
- ``tool_call``: tools whose names and argument names the corpus never uses
  (:func:`turnrl.pretrain.text.held_out`); the model writes its first reply greedily, and
  ``valid`` is the share that parse as exactly one call (``turnrl.envs.tools`` parser, either
  format) of the right tool with every argument equal to the request's; ``answer`` is
  ``exact`` on the final answer after the tool's result.

Results are ``{probe: {metric: value}}`` plus ``n``; :func:`markdown` renders them as a table.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from turnrl.envs.tools.parsing import find_calls
from turnrl.models.chat import TemplateLedger, ledger_from_messages
from turnrl.pretrain import skills
from turnrl.pretrain.skills import Message
from turnrl.pretrain.tool_skill import tool_call

COPY_DISTANCES = (64, 256, 1024)
PROBE_BUDGET = 1200  # characters of context a probe's skill may spread over


@dataclass(frozen=True)
class Item:
    """A probe example: ``messages`` up to and including the ``target`` assistant turn."""

    messages: list[Message]

    @property
    def target(self) -> str:
        return self.messages[-1]["content"]


def _copy(distance: int) -> Callable[[random.Random], list[Message]]:
    return lambda rng: skills.copy(rng, PROBE_BUDGET, distance=distance, length=16)


def _skill(fn: Callable[[random.Random, int], list[Message]]
           ) -> Callable[[random.Random], list[Message]]:
    return lambda rng: fn(rng, PROBE_BUDGET)


def _first_call(rng: random.Random) -> list[Message]:
    messages = tool_call(rng, PROBE_BUDGET, probe=True)
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    return messages[:first + 1]


TEACHER_FORCED: dict[str, Callable[[random.Random], list[Message]]] = {
    **{f"copy@{d}": _copy(d) for d in COPY_DISTANCES},
    "lookup": _skill(skills.lookup),
    "choose": _skill(skills.choose),
    "memory": _skill(skills.memory),
    "arithmetic": _skill(skills.arithmetic),
    "count_compare": _skill(skills.count_compare),
    "tool_answer": lambda rng: tool_call(rng, PROBE_BUDGET, probe=True),
}


def items(name: str, n: int, make: Callable[[random.Random], list[Message]]) -> list[Item]:
    """The probe's ``n`` held-out examples (the same for every model)."""
    return [Item(make(random.Random(f"probe:{name}:{i}"))) for i in range(n)]


def _ledgers(tokenizer: PreTrainedTokenizerBase, batch: Sequence[Item]
             ) -> list[tuple[list[int], list[int]]]:
    """Token ids and the positions of the target turn's tokens (content and end of turn)."""
    out = []
    for item in batch:
        ledger = ledger_from_messages(tokenizer, item.messages)
        ids, mask = ledger.token_ids, ledger.loss_mask
        end = max(i for i, m in enumerate(mask) if m) + 1
        start = end
        while start > 0 and mask[start - 1]:
            start -= 1
        out.append((ids[:end], list(range(start, end))))
    return out


@torch.no_grad()
def teacher_forced(model: nn.Module, tokenizer: PreTrainedTokenizerBase,
                   batch: Sequence[Item], *, batch_size: int = 16) -> dict[str, float]:
    """``accuracy`` (argmax right, per content token) and ``exact`` (every target token,
    end of turn included, right) over ``batch``."""
    correct = total = exact = 0
    device = next(model.parameters()).device
    encoded = _ledgers(tokenizer, batch)
    for start in range(0, len(encoded), batch_size):
        chunk = encoded[start:start + batch_size]
        width = max(len(ids) for ids, _ in chunk)
        input_ids = torch.full((len(chunk), width), tokenizer.pad_token_id, dtype=torch.long)
        for row, (ids, _) in enumerate(chunk):
            input_ids[row, :len(ids)] = torch.tensor(ids)
        # right padding under causal attention: no real token sees it, no mask needed
        logits = model(input_ids=input_ids.to(device)).logits
        predicted = logits.argmax(-1).cpu()
        for row, (ids, positions) in enumerate(chunk):
            right = [int(predicted[row, p - 1]) == ids[p] for p in positions]
            correct += sum(right[:-1])
            total += len(right) - 1
            exact += all(right)
    return {"accuracy": correct / max(total, 1), "exact": exact / max(len(batch), 1)}


class _AnyName:
    """Every name is a known tool name (to read the reference call of either format)."""

    def __contains__(self, name: object) -> bool:
        return True


def _call_of(text: str, known: Any) -> tuple[str | None, Any]:
    """The one well-formed call in ``text`` (name, arguments), or ``(None, None)``. JSON
    argument values compare as text (``7`` and ``"7"`` are the same copied value)."""
    calls = find_calls(text, "auto", known)
    if len(calls) != 1 or calls[0].problem is not None:
        return None, None
    arguments = calls[0].arguments
    if isinstance(arguments, dict):
        arguments = {k: str(v) for k, v in arguments.items()}
    return calls[0].name, arguments


def _generation_prompt(tokenizer: PreTrainedTokenizerBase, messages: list[Message]) -> list[int]:
    ledger = TemplateLedger(tokenizer)
    return ledger.add_messages(messages, turn=-1, add_generation_prompt=True)


@torch.no_grad()
def tool_calls(model: Any, tokenizer: PreTrainedTokenizerBase,
               batch: Sequence[Item], *, batch_size: int = 16) -> dict[str, float]:
    """``valid``: the greedy first reply is one call of the right tool with the request's
    arguments, exactly. ``model``: a causal LM with ``generate`` (transformers or peft)."""
    device = next(model.parameters()).device
    valid = 0
    for start in range(0, len(batch), batch_size):
        chunk = batch[start:start + batch_size]
        prompts = [_generation_prompt(tokenizer, item.messages[:-1]) for item in chunk]
        width = max(map(len, prompts))
        input_ids = torch.full((len(chunk), width), tokenizer.pad_token_id, dtype=torch.long)
        attention = torch.zeros_like(input_ids)
        for row, ids in enumerate(prompts):  # left padding, for generation
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            attention[row, width - len(ids):] = 1
        longest = max(len(tokenizer.encode(item.target, add_special_tokens=False))
                      for item in chunk)
        out = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                             max_new_tokens=longest + 16, do_sample=False,
                             eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id)
        for row, item in enumerate(chunk):
            reply = str(tokenizer.decode(out[row, width:], skip_special_tokens=True))
            gold = _call_of(item.target, _AnyName())
            valid += gold[0] is not None and _call_of(reply, {gold[0]}) == gold
    return {"valid": valid / max(len(batch), 1)}


def run_probes(model: Any, tokenizer: PreTrainedTokenizerBase, n: int
               ) -> dict[str, dict[str, float]]:
    """Every probe on ``n`` held-out examples: ``{probe: {metric: value, "n": n}}``."""
    model.eval()
    results = {name: {**teacher_forced(model, tokenizer, items(name, n, make)), "n": float(n)}
               for name, make in TEACHER_FORCED.items()}
    results["tool_call"] = {**tool_calls(model, tokenizer, items("tool_call", n, _first_call)),
                            "n": float(n)}
    for name in ("lookup", "choose", "memory", "arithmetic", "count_compare", "tool_answer"):
        results[name].pop("accuracy")  # the answer is right whole or not: exact says it
    return results


HEADLINE = {**{f"copy@{d}": "accuracy" for d in COPY_DISTANCES}, "tool_call": "valid"}


def headline(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """One number per probe: copy accuracy, valid tool calls, exact answers elsewhere."""
    return {name: values[HEADLINE.get(name, "exact")] for name, values in results.items()}


def markdown(columns: dict[str, dict[str, dict[str, float]]]) -> str:
    """A table with a row per probe and a column per model (``{model: results}``)."""
    names = list(next(iter(columns.values())))
    head = "| probe | measure | " + " | ".join(columns) + " |"
    rule = "|---|---|" + "---|" * len(columns)
    rows = [f"| {name} | {HEADLINE.get(name, 'exact')} | "
            + " | ".join(f"{headline(r)[name]:.3f}" for r in columns.values()) + " |"
            for name in names]
    return "\n".join([head, rule, *rows]) + "\n"
