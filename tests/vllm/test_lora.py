"""LoRA through vLLM's LoRA support: the engine serves the peft model's adapters (log-probs
equal the peft forward pass) and each push serves the newest adapter."""

from __future__ import annotations

import pytest
import torch
from vllm_support import require_vllm

from turnrl.models.policy import load_policy, token_logprobs
from turnrl.rollout.engine import SamplingParams
from turnrl.rollout.vllm_engine import VLLMEngine

require_vllm()


def logprobs_of(model, prompt_ids: list[int], sampled: list[int]) -> torch.Tensor:
    ids = torch.tensor([prompt_ids + sampled])
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, ids, torch.ones_like(ids))
    return logprobs[0, len(prompt_ids):]


def nudge_adapters(model, scale: float) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.add_(torch.randn_like(p) * scale)


def test_the_engine_serves_each_pushed_adapter(vllm_model_dir, vllm_tokenizer) -> None:
    model = load_policy(vllm_model_dir, dtype=torch.float32, device=torch.device("cpu"),
                        lora={"r": 8, "lora_alpha": 16, "lora_dropout": 0.0,
                              "target_modules": ["q_proj", "v_proj", "o_proj"]}).eval()
    nudge_adapters(model, 0.3)  # lora_B starts at 0: make the adapter matter
    base = load_policy(vllm_model_dir, dtype=torch.float32, device=torch.device("cpu")).eval()
    ids = vllm_tokenizer.apply_chat_template([{"role": "user", "content": "hi"}],
                                             add_generation_prompt=True, tokenize=True,
                                             return_dict=True)["input_ids"]
    params = SamplingParams(max_new_tokens=24, seed=5)
    engine = VLLMEngine(model, eos_token_id=vllm_tokenizer.eos_token_id, max_model_len=512,
                        lora_rank=8)
    try:
        for push in range(2):
            out = engine.generate_batch([ids], params)[0]
            got = torch.tensor(out.logprobs)
            assert (logprobs_of(model, ids, out.token_ids) - got).abs().max().item() < 1e-5
            assert (logprobs_of(base, ids, out.token_ids) - got).abs().max().item() > 1e-3
            if push == 0:
                nudge_adapters(model, 0.3)
                engine.load_weights(model)
        with pytest.raises(Exception, match="peft model"):
            engine.load_weights(model.state_dict())
    finally:
        engine.close()
