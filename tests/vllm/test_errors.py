"""Errors a user of the vLLM engine can hit are one clear line that says the fix."""

from __future__ import annotations

import pytest
import torch
from vllm_support import require_vllm

from turnrl.rollout.vllm_engine import VLLMEngine, VLLMEngineError

require_vllm()


def test_an_architecture_vllm_lacks_is_one_clear_line(load_vllm_tiny, vllm_tokenizer) -> None:
    model = load_vllm_tiny()
    model.config.architectures = ["TurnrlToyForCausalLM"]
    with pytest.raises(VLLMEngineError, match=r"does not support the model's architecture "
                       r"\['TurnrlToyForCausalLM'\]; use rollout.engine=hf"):
        VLLMEngine(model, eos_token_id=vllm_tokenizer.eos_token_id)


def test_a_kv_cache_too_small_for_the_context_is_one_clear_line(vllm_tokenizer) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    # 8 layers x 2 x 1024 x 4 bytes = 64 KiB a token: 1 GiB holds 16k tokens, not 64k
    config = LlamaConfig(vocab_size=len(vllm_tokenizer), hidden_size=1024, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=16,
                         intermediate_size=64, max_position_embeddings=65536,
                         architectures=["LlamaForCausalLM"])
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model = model.to_empty(device="cpu")
    with pytest.raises(VLLMEngineError) as error:
        VLLMEngine(model, eos_token_id=vllm_tokenizer.eos_token_id, max_model_len=65536,
                   kv_cache_gib=1)
    message = str(error.value)
    assert "\n" not in message and "not enough memory for the KV cache" in message
    assert "rollout.kv_cache_gib" in message and "rollout.max_context_tokens" in message
