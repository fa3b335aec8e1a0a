"""The probes score what they say: a model that predicts every next token scores 1, one that
predicts the current token again scores 0, a random init scores near 0, and the tool-call
probe counts a call valid only with the right tool and every argument copied exactly."""

from __future__ import annotations

import random
from types import SimpleNamespace

import torch
from torch import nn

from turnrl.models.tiny import build_model, build_tokenizer
from turnrl.pretrain import skills
from turnrl.pretrain.probes import (
    COPY_DISTANCES,
    Item,
    _first_call,
    headline,
    items,
    markdown,
    run_probes,
    teacher_forced,
    tool_calls,
)


class Lookahead(nn.Module):
    """A stand-in "model" whose logits at position t put all mass on input token t + shift
    (shift 1: a perfect next-token predictor under teacher forcing; 0: repeats the input)."""

    def __init__(self, vocab: int, shift: int) -> None:
        super().__init__()
        self.vocab, self.shift = vocab, shift
        self.anchor = nn.Parameter(torch.zeros(1))

    def forward(self, input_ids: torch.Tensor, **_: object) -> SimpleNamespace:
        target = torch.roll(input_ids, -self.shift, dims=1)
        return SimpleNamespace(logits=nn.functional.one_hot(target, self.vocab).float())


class Replier(nn.Module):
    """A stand-in whose ``generate`` writes the given replies after the prompt."""

    def __init__(self, tokenizer, replies: list[str]) -> None:
        super().__init__()
        self.tokenizer, self.replies = tokenizer, replies
        self.anchor = nn.Parameter(torch.zeros(1))

    def generate(self, input_ids: torch.Tensor, **_: object) -> torch.Tensor:
        rows = [input_ids[i].tolist() + self.tokenizer.encode(self.replies.pop(0),
                                                              add_special_tokens=False)
                for i in range(len(input_ids))]
        width = max(map(len, rows))
        return torch.tensor([r + [self.tokenizer.pad_token_id] * (width - len(r)) for r in rows])


def test_teacher_forced_scores_are_aligned_with_the_target_turn() -> None:
    tokenizer = build_tokenizer()
    batch = items("lookup", 12, lambda rng: skills.lookup(rng, 800))
    perfect = teacher_forced(Lookahead(len(tokenizer), 1), tokenizer, batch, batch_size=5)
    assert perfect == {"accuracy": 1.0, "exact": 1.0}
    stuck = teacher_forced(Lookahead(len(tokenizer), 0), tokenizer, batch, batch_size=5)
    assert stuck["exact"] == 0.0 and stuck["accuracy"] < 0.2


def test_probe_examples_are_fixed_and_held_out() -> None:
    first = items("copy@64", 5, lambda rng: [{"role": "user", "content": str(rng.random())}])
    again = items("copy@64", 5, lambda rng: [{"role": "user", "content": str(rng.random())}])
    assert first == again
    assert first[0].messages[0]["content"] != str(random.Random("0/0").random())


def test_a_tool_call_is_valid_only_with_the_right_tool_and_exact_arguments() -> None:
    tokenizer = build_tokenizer()
    batch = [Item(_first_call(random.Random(f"t{i}"))) for i in range(4)]
    gold = [item.target for item in batch]
    wrong_value = gold[1].replace("]", "x]") if "[" in gold[1] and "<tool_call>" not in \
        gold[1] else gold[1].replace('"}', 'x"}', 1)
    replies = [gold[0], wrong_value, "I do not know.", gold[3] + " and more text"]
    result = tool_calls(Replier(tokenizer, replies), tokenizer, batch, batch_size=4)
    assert result == {"valid": 0.5}


def test_a_random_init_scores_near_zero_and_the_table_has_every_probe() -> None:
    torch.manual_seed(0)
    tokenizer = build_tokenizer()
    results = run_probes(build_model(len(tokenizer)), tokenizer, 4)
    assert set(results) >= {f"copy@{d}" for d in COPY_DISTANCES} | {"tool_call", "lookup"}
    assert all(v <= 0.1 for v in headline(results).values())
    table = markdown({"random": results, "again": results})
    assert table.count("\n") == len(results) + 2 and "| copy@1024 | accuracy |" in table
