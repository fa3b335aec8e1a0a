"""A tiny model that turnrl builds itself: no downloads, saved in the Hugging Face format.

The tokenizer is character level (every printable ASCII character is a token) plus the
ChatML markers and role names as single tokens, with a ChatML chat template. The model is a
small Llama-architecture ``LlamaForCausalLM`` (0.8 M parameters by default). Both are
written with ``save_pretrained`` so the rest of turnrl loads them exactly like a downloaded model.
"""

from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from turnrl.config import TinyConfig

PAD, BOS, EOS, UNK = "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]
ROLE_TOKENS = ["system", "user", "assistant", "tool"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + (message['content'] or '') }}"
    # an assistant's tool calls as the text the model writes for them (OpenAI messages)
    "{% for call in message.get('tool_calls') or [] %}"
    "{{ '<tool_call>' + {'name': call['function']['name'], "
    "'arguments': call['function']['arguments']} | tojson + '</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Character-level fast tokenizer with ChatML specials and a chat template."""
    chars = [c for c in string.printable if c not in "\x0b\x0c\r"]
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + chars)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=[],
        chat_template=CHATML_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.add_tokens(ROLE_TOKENS)  # single tokens, decoded back to the same text
    return tokenizer


def llama_config(vocab_size: int, config: TinyConfig | None = None) -> LlamaConfig:
    """The Hugging Face config of the tiny model of shape ``config`` (``model.tiny.*``)."""
    cfg = config or TinyConfig()
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        rope_theta=10000.0,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def build_model(vocab_size: int, config: TinyConfig | None = None) -> LlamaForCausalLM:
    """A randomly initialised Llama-architecture causal LM (fp32), deterministic in ``seed``."""
    cfg = config or TinyConfig()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = LlamaForCausalLM(llama_config(vocab_size, cfg))
    return model.float()


def save_model_dir(path: str | Path, model: LlamaForCausalLM,
                   tokenizer: PreTrainedTokenizerFast) -> Path:
    """Save ``model`` and ``tokenizer`` to ``path`` as a Hugging Face model dir, with the
    tokenizer's end-of-turn and pad tokens in the model's config and generation config."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for config in (model.config, model.generation_config):
        config.eos_token_id = tokenizer.eos_token_id
        config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def init_tiny_model(path: str | Path, config: TinyConfig | None = None) -> Path:
    """Build the tokenizer and a randomly initialised model (``tiny-random``) and save both
    to ``path`` (a Hugging Face model dir)."""
    tokenizer = build_tokenizer()
    path = save_model_dir(path, build_model(len(tokenizer), config), tokenizer)
    (path / "turnrl_tiny.json").write_text((config or TinyConfig()).model_dump_json() + "\n")
    return path
