"""The pretraining corpus: deterministic in its seed, mixed by its shares, packed exactly as
SFT renders conversations, env-agnostic, and its tool schemas kept apart from the probes'."""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys

import pytest

from turnrl.envs.tools.parsing import find_calls
from turnrl.models.chat import ledger_from_messages
from turnrl.models.tiny import build_tokenizer
from turnrl.pretrain import skills, text
from turnrl.pretrain.corpus import DEFAULT_SHARES, SKILLS, Corpus, conversation
from turnrl.pretrain.tool_skill import make_tools, tool_call


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer()


def test_a_conversation_is_a_function_of_seed_and_index() -> None:
    first = [conversation(3, i, DEFAULT_SHARES, 1000) for i in range(50)]
    again = [conversation(3, i, DEFAULT_SHARES, 1000) for i in range(50)]
    other = [conversation(4, i, DEFAULT_SHARES, 1000) for i in range(50)]
    assert first == again
    assert sum(a != b for a, b in zip(first, other, strict=True)) > 45


def test_the_mixture_follows_the_shares() -> None:
    n = 4000
    counts = collections.Counter(conversation(0, i, DEFAULT_SHARES, 1000)[0] for i in range(n))
    total = sum(DEFAULT_SHARES.values())
    for name, share in DEFAULT_SHARES.items():  # binomial sd <= 0.008 at n = 4000
        assert abs(counts[name] / n - share / total) < 0.03, name
    only = {"arithmetic": 1.0, "copy": 0.0}
    assert {conversation(0, i, only, 1000)[0] for i in range(200)} == {"arithmetic"}


def test_every_skill_writes_a_chat_with_a_final_assistant_turn() -> None:
    for name, skill in SKILLS.items():
        for i in range(30):
            messages = skill(random.Random(i), 1000)
            assert messages[-1]["role"] == "assistant" and messages[-1]["content"], name
            assert {m["role"] for m in messages} <= {"system", "user", "assistant", "tool"}


def test_rows_are_the_chat_template_tokens_of_whole_conversations(tokenizer) -> None:
    corpus = Corpus(tokenizer, seed=1, seq_len=512)
    rows = corpus.batch(0, 3)
    assert rows.input_ids.shape == (3, 512) and rows.next_index > 3
    # unpack: every row is conversations start..next in order, each as SFT tokenizes it
    expected_ids, expected_mask, ends = [], [], []
    for ids, mask, end, names in corpus.rows(0):
        expected_ids.append(ids)
        expected_mask.append(mask)
        ends.append(end)
        assert len(ids) == len(mask) == len(names) <= 512
        if len(expected_ids) == 3:
            break
    assert ends[-1] == rows.next_index and ends == sorted(ends)
    for row in range(3):
        n = len(expected_ids[row])
        assert rows.input_ids[row, :n].tolist() == expected_ids[row]
        assert rows.loss_mask[row, :n].tolist() == expected_mask[row]
        assert rows.attention_mask[row].sum() == n and rows.loss_mask[row, n:].sum() == 0
        assert (rows.skill_ids[row, n:] == -1).all() and (rows.skill_ids[row, :n] >= 0).all()
        assert n > 512 - 200  # rows end nearly full
    # a batch continues where the previous one stopped
    head = corpus.batch(0, 2)
    tail = corpus.batch(head.next_index, 1)
    assert (tail.input_ids[0] == rows.input_ids[2]).all()


def test_trained_tokens_are_exactly_the_assistant_replies(tokenizer) -> None:
    messages = skills.memory(random.Random(5), 1000)
    ledger = ledger_from_messages(tokenizer, messages)
    rendered = tokenizer.apply_chat_template(messages, tokenize=False)
    assert tokenizer.decode(ledger.token_ids) == rendered
    trained = [t for t, m in zip(ledger.token_ids, ledger.loss_mask, strict=True) if m]
    replies = [m["content"] for m in messages if m["role"] == "assistant"]
    assert tokenizer.decode(trained) == "<|im_end|>".join(replies) + "<|im_end|>"


def test_the_corpus_imports_nothing_from_the_envs() -> None:
    code = ("import sys, turnrl.pretrain.corpus; "
            "print([m for m in sys.modules if m.startswith('turnrl.envs')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_copy_puts_the_string_at_the_asked_distance() -> None:
    for distance in (0, 64, 1024):
        messages = skills.copy(random.Random(distance), 1200, distance=distance, length=16)
        target = messages[-1]["content"]
        context = "\n".join(m["content"] for m in messages[:-1])
        assert len(target) == 16 and target in context
        between = context.split(target, 1)[1]
        assert distance <= len(between) <= distance + 80


def test_filler_has_the_exact_length() -> None:
    rng = random.Random(0)
    assert [len(text.filler(rng, n)) for n in (0, 1, 17, 500)] == [0, 1, 17, 500]


def test_tool_calls_copy_the_request_into_a_parsable_call() -> None:
    for i in range(200):
        messages = tool_call(random.Random(i), 1200)
        request = next(m for m in messages if m["role"] == "user" and "Tools" not in
                       m["content"] and "tools" not in m["content"])["content"]
        call = next(m for m in messages if m["role"] == "assistant")["content"]
        [parsed] = find_calls(call, "auto", _Everything())
        assert parsed.problem is None and parsed.name in "\n".join(
            m["content"] for m in messages[:2])
        values = parsed.arguments.values() if isinstance(parsed.arguments, dict) \
            else [parsed.arguments]
        assert all(str(v) in request for v in values), (request, call)


def test_probe_schemas_are_unseen_in_the_corpus() -> None:
    for i in range(100):
        for probe in (False, True):
            tools = make_tools(random.Random(i), 5, compact=i % 2 == 0, probe=probe)
            names = [n for t in tools for n in (t.name, *t.params)]
            assert all(text.held_out(n) == probe for n in names)
            messages = tool_call(random.Random(i), 1200, probe=probe)
            call = next(m for m in messages if m["role"] == "assistant")["content"]
            name = call.split("[")[0] if "<tool_call>" not in call else json.loads(
                call.removeprefix("<tool_call>").removesuffix("</tool_call>"))["name"]
            assert text.held_out(name) == probe


class _Everything:
    def __contains__(self, name: object) -> bool:
        return True
