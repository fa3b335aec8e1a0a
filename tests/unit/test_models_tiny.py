"""The built-in tiny model: character tokenizer with ChatML specials, HF round trip, seeding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from turnrl.config import TinyConfig
from turnrl.models.chat import encode, ledger_from_messages, render
from turnrl.models.tiny import (
    BOS,
    CHATML_TEMPLATE,
    EOS,
    PAD,
    build_model,
    build_tokenizer,
    init_tiny_model,
)

CHATML_TEXT = (
    "<|im_start|>system\nReach G and avoid H.  Reply up, down, left or right.<|im_end|>\n"
    "<|im_start|>user\nA...\n.H..\n\t...H\nH..G<|im_end|>\n"
    "<|im_start|>assistant\n  right \n<|im_end|>\n<|im_start|>user\n37+48=<|im_end|>\n"
)

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "37+48="},
    {"role": "assistant", "content": "85"},
    {"role": "user", "content": "Correct."},
]


@pytest.mark.parametrize("text", [
    CHATML_TEXT,
    "  leading and trailing spaces  ",
    "\n\nnew\nlines\n",
    "the user asked the assistant for a tool in the system",  # role words inside text
    "userassistant<|im_end|><|im_start|>toolsystem",
    "".join(chr(c) for c in range(32, 127)),  # every printable ASCII character
])
def test_tokenizer_round_trips_text(tokenizer, text: str) -> None:
    ids = encode(tokenizer, text)
    assert tokenizer.decode(ids, skip_special_tokens=False) == text


def test_tokenizer_is_character_level_with_single_token_specials(tokenizer) -> None:
    ids = encode(tokenizer, "<|im_start|>user\nab<|im_end|>")
    assert ids == [tokenizer.convert_tokens_to_ids(t)
                   for t in [BOS, "user", "\n", "a", "b", EOS]]
    assert tokenizer.eos_token == EOS and tokenizer.pad_token == PAD
    assert tokenizer.eos_token_id != tokenizer.pad_token_id


def test_saved_tokenizer_and_model_load_back_with_auto_classes(tiny_model_dir: Path,
                                                               tiny_config) -> None:
    built_tok = build_tokenizer()
    loaded_tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    assert len(loaded_tok) == len(built_tok)
    assert encode(loaded_tok, CHATML_TEXT) == encode(built_tok, CHATML_TEXT)
    assert loaded_tok.eos_token_id == built_tok.eos_token_id
    assert loaded_tok.pad_token_id == built_tok.pad_token_id

    loaded = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    built = build_model(len(built_tok), tiny_config).eval()  # same seed: same weights
    assert loaded.config.eos_token_id == built_tok.eos_token_id
    assert loaded.config.hidden_size == tiny_config.hidden_size
    assert loaded.config.num_key_value_heads == tiny_config.num_kv_heads
    ids = torch.tensor([encode(built_tok, CHATML_TEXT)])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, built(ids).logits)
    assert loaded(ids).logits.dtype == torch.float32


def test_chat_template_renders_chatml(tokenizer) -> None:
    assert tokenizer.chat_template == CHATML_TEMPLATE
    expected = ("<|im_start|>system\nBe brief.<|im_end|>\n"
                "<|im_start|>user\n37+48=<|im_end|>\n"
                "<|im_start|>assistant\n85<|im_end|>\n"
                "<|im_start|>user\nCorrect.<|im_end|>\n")
    assert render(tokenizer, CONVERSATION, add_generation_prompt=False) == expected
    assert render(tokenizer, CONVERSATION[:2], add_generation_prompt=True) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n37+48=<|im_end|>\n"
        "<|im_start|>assistant\n")


def test_init_tiny_model_is_deterministic_given_the_seed(tmp_path: Path) -> None:
    cfg = TinyConfig(hidden_size=16, num_layers=1, num_heads=2, num_kv_heads=1,
                     intermediate_size=32, seed=3)
    first = load_file(str(init_tiny_model(tmp_path / "a", cfg) / "model.safetensors"))
    second = load_file(str(init_tiny_model(tmp_path / "b", cfg) / "model.safetensors"))
    other = load_file(str(init_tiny_model(tmp_path / "c", cfg.model_copy(update={"seed": 4}))
                          / "model.safetensors"))
    assert first.keys() == second.keys() == other.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert not all(torch.equal(first[k], other[k]) for k in first)
    # the shape is recorded next to the weights and reads back as the same config
    saved = json.loads((tmp_path / "a" / "turnrl_tiny.json").read_text())
    assert TinyConfig(**saved) == cfg


def test_init_tiny_model_does_not_touch_the_global_rng(tmp_path: Path) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    init_tiny_model(tmp_path, TinyConfig(hidden_size=16, num_layers=1, num_heads=2,
                                         num_kv_heads=1, intermediate_size=32))
    assert torch.equal(torch.rand(3), expected)


def test_ledger_from_messages_marks_assistant_content_and_eos(tokenizer) -> None:
    ledger = ledger_from_messages(tokenizer, CONVERSATION)
    text = render(tokenizer, CONVERSATION, add_generation_prompt=False)
    assert tokenizer.decode(ledger.token_ids, skip_special_tokens=False) == text
    assert ledger.token_ids == encode(tokenizer, text)
    sampled = [t for t, m in zip(ledger.token_ids, ledger.loss_mask, strict=True) if m]
    assert tokenizer.decode(sampled, skip_special_tokens=False) == "85" + EOS
    assert len(ledger.token_ids) == len(ledger.loss_mask) == len(ledger.logprobs) \
        == len(ledger.turn_index)
    assert set(ledger.turn_index) == {-1, 0}
    assert ledger.turn_index[0] == -1 and ledger.turn_index[-1] == 0
