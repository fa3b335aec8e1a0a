"""The pretraining corpus: a seeded mixture of skills, tokenized and packed into rows.

Conversation ``i`` of a corpus with seed ``s`` is drawn from ``random.Random(f"{s}/{i}")``: its
skill by the shares, then its text by the skill's generator. The corpus is therefore a pure
function of (seed, shares, row length), any conversation can be made again from its index, and
a resumed run continues at the index where it stopped.

A conversation becomes tokens exactly as SFT renders one (the tokenizer's chat template, via
:func:`turnrl.models.chat.ledger_from_messages`): assistant contents and their end-of-turn
token are trained (``loss_mask`` 1), everything else is context. Rows of ``seq_len`` tokens are
packed with whole conversations, in order, each drawn with the room left in its row as its
budget (:meth:`Corpus.rows`), and padded at the end (``attention_mask`` 0, ``loss_mask`` 0).

This module and the skills import nothing from ``turnrl.envs`` (a test checks it), so what
the model learns here is a skill, not an env.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from turnrl.config.pretrain import CorpusConfig
from turnrl.models.chat import ledger_from_messages
from turnrl.pretrain import skills
from turnrl.pretrain.skills import Message, Skill
from turnrl.pretrain.tool_skill import tool_call

ROW_MARGIN = 64  # tokens of chat markers and phrasing a conversation adds to its budget
MIN_ROOM = 40  # a row with less room left than this is closed

SKILLS: dict[str, Skill] = {
    "copy": skills.copy,
    "echo": skills.echo,
    "induction": skills.induction,
    "lookup": skills.lookup,
    "choose": skills.choose,
    "tool_call": tool_call,
    "memory": skills.memory,
    "arithmetic": skills.arithmetic,
    "count_compare": skills.count_compare,
}
# the shipped recipe's mixture (docs/pretraining.md says what each part teaches)
DEFAULT_SHARES: dict[str, float] = CorpusConfig().shares


def conversation(seed: int, index: int, shares: Mapping[str, float], budget: int
                 ) -> tuple[str, list[Message]]:
    """Conversation ``index`` of the corpus ``seed``: ``(skill name, messages)``.

    ``budget``: the most characters a long-range skill spreads its context over.
    """
    rng = random.Random(f"{seed}/{index}")
    names = list(shares)
    skill = rng.choices(names, weights=[shares[n] for n in names])[0]
    return skill, SKILLS[skill](rng, budget)


@dataclass(frozen=True)
class Rows:
    """A batch of packed rows. ``input_ids``, ``attention_mask``, ``loss_mask``,
    ``skill_ids`` (index in :data:`SKILLS` of each token's conversation, -1 on padding): (B, T).
    ``next_index``: the first conversation not in this batch."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    skill_ids: torch.Tensor
    next_index: int


class Corpus:
    """Packed rows of the corpus ``seed``: ``corpus.batch(start, rows)`` is deterministic."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, *, seed: int, seq_len: int,
                 shares: Mapping[str, float] | None = None) -> None:
        shares = dict(DEFAULT_SHARES if shares is None else shares)
        if set(shares) - set(SKILLS) or any(v < 0 for v in shares.values()) \
                or sum(shares.values()) <= 0:
            raise ValueError(f"corpus shares must name skills of {list(SKILLS)} with "
                             f"weights >= 0, not all 0; got {shares}")
        self.tokenizer = tokenizer
        self.seed = seed
        self.seq_len = seq_len
        self.shares = shares
        # characters of context a conversation may spread over: the row, less its markers
        self.budget = max(ROW_MARGIN, seq_len - ROW_MARGIN)

    def encode(self, index: int, budget: int | None = None) -> tuple[str, list[int], list[int]]:
        """``(skill, token ids, loss mask)`` of conversation ``index``, its context spread over
        at most ``budget`` characters (default: a whole row's)."""
        skill, messages = conversation(self.seed, index, self.shares, budget or self.budget)
        ledger = ledger_from_messages(self.tokenizer, messages)
        return skill, ledger.token_ids, ledger.loss_mask

    def rows(self, start: int) -> Iterator[tuple[list[int], list[int], int, list[str]]]:
        """Packed rows from conversation ``start`` on: ``(ids, mask, next index, skill of each
        token)``.

        Each conversation is drawn with the room left in its row as its budget, so a row's
        last conversations are shorter and rows end nearly full; one that still does not fit
        closes the row and is drawn again, with a whole row's budget, to open the next (one
        that fits no row is skipped). A row therefore depends only on its first index.
        """
        index = start
        while True:
            ids: list[int] = []
            mask: list[int] = []
            names: list[str] = []
            while (room := self.seq_len - len(ids)) >= MIN_ROOM:
                budget = self.budget if not ids else room - ROW_MARGIN
                skill, tokens, weights = self.encode(index, budget)
                if len(tokens) > room:
                    if ids:
                        break
                    index += 1  # fits no row
                    continue
                ids += tokens
                mask += weights
                names += [skill] * len(tokens)
                index += 1
            yield ids, mask, index, names

    def batch(self, start: int, size: int) -> Rows:
        """``size`` rows from conversation ``start`` on, right-padded to ``seq_len``."""
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((size, self.seq_len), pad, dtype=torch.long)
        attention = torch.zeros((size, self.seq_len), dtype=torch.long)
        loss = torch.zeros((size, self.seq_len), dtype=torch.float32)
        skill_ids = torch.full((size, self.seq_len), -1, dtype=torch.long)
        numbers = {name: i for i, name in enumerate(SKILLS)}
        index = start
        rows = self.rows(start)
        for row in range(size):
            ids, mask, index, names = next(rows)
            input_ids[row, :len(ids)] = torch.tensor(ids)
            attention[row, :len(ids)] = 1
            loss[row, :len(mask)] = torch.tensor(mask, dtype=torch.float32)
            skill_ids[row, :len(names)] = torch.tensor([numbers[n] for n in names])
        return Rows(input_ids, attention, loss, skill_ids, index)
