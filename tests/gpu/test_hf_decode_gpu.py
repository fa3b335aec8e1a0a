"""The hf engine's decoding step on a GPU in bf16: the log-probs it samples with match a bf16
forward pass of the whole sequence to bf16 rounding, as the CPU tests check in fp32.
Skipped without a CUDA device."""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_bf16_decoding_steps_match_a_bf16_forward_pass() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from turnrl.models.policy import token_logprobs
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.hf import HFEngine

    config = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
    engine = HFEngine(model, eos_token_id=-1, pad_token_id=0, seed=0)
    assert engine._decode is not None
    prompts = [[1 + (7 * i + j) % 500 for j in range(5 + 3 * i)] for i in range(8)]
    params = [SamplingParams(max_new_tokens=24, seed=i) for i in range(8)]
    for prompt, completion in zip(prompts, engine.generate_batch(prompts, params), strict=True):
        ids = torch.tensor([prompt + completion.token_ids], device="cuda")
        with torch.no_grad():
            want, _ = token_logprobs(model, ids, torch.ones_like(ids))
        got = torch.tensor(completion.logprobs)
        diff = (want[0, len(prompt):].float().cpu() - got).abs()
        assert diff.mean().item() < 0.05 and diff.max().item() < 0.5  # bf16: 8 mantissa bits
