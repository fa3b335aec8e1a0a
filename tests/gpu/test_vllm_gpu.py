"""The vLLM engine's GPU-only behaviour: sleep mode frees the device and the next push
wakes it with the learner's weights, bf16 sampling matches a bf16 forward pass, and tensor
parallelism serves the same policy. Skipped without a CUDA device or without vLLM."""

from __future__ import annotations

import pytest
import torch

from turnrl.packages import installed

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(not installed("vllm"), reason="needs vLLM (pip install 'turnrl[vllm]')"),
]


def small_llama(vocab: int = 512):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=512,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, architectures=["LlamaForCausalLM"])
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()


def forward_logprobs(model, prompt: list[int], sampled: list[int]) -> torch.Tensor:
    from turnrl.models.policy import token_logprobs

    ids = torch.tensor([prompt + sampled], device="cuda")
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, ids, torch.ones_like(ids))
    return logprobs[0, len(prompt):].float().cpu()


def used_gib() -> float:
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def test_sleep_frees_the_gpu_and_a_push_wakes_it() -> None:
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.vllm_engine import VLLMEngine

    model = small_llama()
    engine = VLLMEngine(model, eos_token_id=1, max_model_len=1024, sleep_mode=True,
                        gpu_memory_utilization=0.3)
    try:
        prompt, params = list(range(10, 40)), SamplingParams(max_new_tokens=16, seed=1)
        before = engine.generate_batch([prompt], params)[0]
        awake = used_gib()
        engine.sleep()
        asleep = used_gib()
        assert awake - asleep > 1.0  # the KV cache (30% of the device) was released
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.02)
        engine.load_weights(model)  # wakes it
        after = engine.generate_batch([prompt], params)[0]
        got = torch.tensor(after.logprobs)
        assert (forward_logprobs(model, prompt, after.token_ids) - got).abs().mean() < 2e-2
        assert after.token_ids != before.token_ids or after.logprobs != before.logprobs
    finally:
        engine.close()


def test_bf16_sampling_matches_a_bf16_forward_pass() -> None:
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.vllm_engine import VLLMEngine

    model = small_llama()
    engine = VLLMEngine(model, eos_token_id=1, max_model_len=1024, gpu_memory_utilization=0.2)
    try:
        outs = engine.generate_batch([list(range(5, 5 + n)) for n in (8, 20, 40)],
                                     SamplingParams(max_new_tokens=32, seed=0))
        for n, out in zip((8, 20, 40), outs, strict=True):
            want = forward_logprobs(model, list(range(5, 5 + n)), out.token_ids)
            diff = (want - torch.tensor(out.logprobs)).abs()
            assert diff.mean() < 2e-2 and diff.max() < 0.2  # bf16 kernels differ
    finally:
        engine.close()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_tensor_parallel_serves_the_same_policy() -> None:
    from turnrl.rollout.engine import SamplingParams
    from turnrl.rollout.vllm_engine import VLLMEngine

    model = small_llama()
    engine = VLLMEngine(model, eos_token_id=1, max_model_len=1024, tensor_parallel_size=2,
                        gpu_memory_utilization=0.2)
    try:
        out = engine.generate_batch([list(range(10, 30))], SamplingParams(max_new_tokens=16,
                                                                           seed=0))[0]
        want = forward_logprobs(model, list(range(10, 30)), out.token_ids)
        assert (want - torch.tensor(out.logprobs)).abs().mean() < 2e-2
    finally:
        engine.close()
