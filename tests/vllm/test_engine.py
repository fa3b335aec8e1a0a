"""The vLLM engine against the transformers forward pass: the token ledger is exact on
multi-turn envs, a weight push changes the served policy (and a no-op push nothing), seeds
make each request's samples independent of its batch mates, and errors are one clear line.
"""

from __future__ import annotations

import asyncio
import functools

import pytest
import torch
from vllm_support import require_vllm

from turnrl import envs
from turnrl.models.chat import render
from turnrl.models.policy import token_logprobs
from turnrl.rollout.engine import SamplingParams
from turnrl.rollout.runner import Runner
from turnrl.rollout.vllm_engine import VLLMEngine, VLLMEngineError
from turnrl.rollout.vllm_setup import _explain
from turnrl.train.layout import layout

require_vllm()

ENVS = ("frozenlake-v0", "sokoban-v0", "search-qa-v0")


def prompt(tokenizer, text: str = "hello there") -> list[int]:
    return tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                         add_generation_prompt=True, tokenize=True,
                                         return_dict=True)["input_ids"]


def forward_logprobs(model, prompt_ids: list[int], sampled: list[int],
                     temperature: float = 1.0) -> torch.Tensor:
    ids = torch.tensor([prompt_ids + sampled])
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, ids, torch.ones_like(ids), temperature=temperature)
    return logprobs[0, len(prompt_ids):]


@pytest.mark.parametrize("env_id", ENVS)
def test_ledger_is_exact_on_multi_turn_envs(env_id, engine, policy, vllm_tokenizer) -> None:
    params = SamplingParams(max_new_tokens=24, temperature=0.8)
    runner = Runner(engine, vllm_tokenizer, params, max_context_tokens=2048, sampling_seed=0)
    trajectories = runner.collect(functools.partial(envs.make, env_id), [0, 1, 2], 2)
    assert any(t.num_turns > 1 for t in trajectories), "no episode had a second turn"
    eos = vllm_tokenizer.eos_token_id
    for traj in trajectories:  # the ids decode to the transcript; each turn's mask is its run
        text = vllm_tokenizer.decode(traj.token_ids, skip_special_tokens=False)
        assert text == render(vllm_tokenizer, traj.messages, add_generation_prompt=False)
        sampled = [tok for tok, m in zip(traj.token_ids, traj.loss_mask, strict=True) if m]
        assert traj.policy_versions == [engine.version] * len(sampled)
        turns = [m["content"] for m in traj.messages if m["role"] == "assistant"]
        assert len(turns) == traj.num_turns and sampled.count(eos) <= len(turns)
    batch = layout(trajectories, vllm_tokenizer.pad_token_id)
    with torch.no_grad():
        fresh, _ = token_logprobs(policy, batch.input_ids, batch.attention_mask,
                                  temperature=0.8)
    mask = batch.loss_mask.bool()
    assert int(mask.sum()) > 50
    assert (fresh[mask] - batch.logprobs[mask]).abs().max().item() < 1e-5


def test_stop_tokens_end_a_turn_and_are_kept(engine, policy, vllm_tokenizer) -> None:
    ids = prompt(vllm_tokenizer)
    stop = vllm_tokenizer.convert_tokens_to_ids("e")
    results = engine.generate_batch([ids] * 8, [SamplingParams(
        max_new_tokens=40, seed=s, stop_token_ids=(stop,)) for s in range(8)])
    assert {r.finish_reason for r in results} <= {"stop", "length"}
    for r in results:
        ends = r.token_ids[-1] in (stop, vllm_tokenizer.eos_token_id)
        assert (r.finish_reason == "stop") == ends
        assert not set(r.token_ids[:-1]) & {stop, vllm_tokenizer.eos_token_id}
        assert r.finish_reason == "stop" or len(r.token_ids) == 40
    assert any(r.finish_reason == "stop" for r in results)


def test_seeds_make_samples_independent_of_batch_mates(engine, vllm_tokenizer) -> None:
    ids = prompt(vllm_tokenizer)
    alone = engine.generate_batch([ids], SamplingParams(max_new_tokens=32, seed=7))[0]
    others = [prompt(vllm_tokenizer, f"task {i}") for i in range(4)]
    mixed = engine.generate_batch([*others[:2], ids, *others[2:]], [
        SamplingParams(max_new_tokens=32, seed=s) for s in (1, 2, 7, 3, 4)])[2]
    assert alone.token_ids == mixed.token_ids and alone.logprobs == mixed.logprobs
    other_seed = engine.generate_batch([ids], SamplingParams(max_new_tokens=32, seed=8))[0]
    assert other_seed.token_ids != alone.token_ids


def test_a_burst_larger_than_one_step_keeps_every_seed(engine, vllm_tokenizer) -> None:
    # 64 prompts of 200 tokens are more than one scheduler step takes: the rest wait (on
    # CPU prompts are not prefilled in chunks, whose discarded samples break seeded requests)
    prompts = [prompt(vllm_tokenizer, f"{i:03d} " * 50) for i in range(64)]
    params = [SamplingParams(max_new_tokens=8, seed=i) for i in range(64)]
    burst = engine.generate_batch(prompts, params)
    assert all(c.finish_reason == "stop" or len(c.token_ids) == 8 for c in burst)
    alone = engine.generate_batch([prompts[40]], params[40])[0]
    assert alone.token_ids == burst[40].token_ids


def test_greedy_and_temperature_logprobs_match_a_forward_pass(engine, policy,
                                                             vllm_tokenizer) -> None:
    ids = prompt(vllm_tokenizer)
    for temperature in (0.0, 0.5, 1.3):
        out = engine.generate_batch([ids], SamplingParams(max_new_tokens=20,
                                                          temperature=temperature, seed=1))[0]
        want = forward_logprobs(policy, ids, out.token_ids, temperature or 1.0)
        assert (want - torch.tensor(out.logprobs)).abs().max().item() < 1e-5


def test_weight_push_changes_the_served_policy(engine, policy, load_vllm_tiny,
                                              vllm_tokenizer) -> None:
    ids = prompt(vllm_tokenizer)
    params = SamplingParams(max_new_tokens=24, seed=3)
    before = engine.generate_batch([ids], params)[0]
    engine.load_weights(policy)  # a no-op push: the same samples and log-probs
    same = engine.generate_batch([ids], params)[0]
    assert same.token_ids == before.token_ids and same.logprobs == before.logprobs
    moved = load_vllm_tiny().eval()
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    try:
        engine.load_weights(moved.state_dict())  # a state dict works too
        engine.version = 1
        after = engine.generate_batch([ids], params)[0]
        new = forward_logprobs(moved, ids, after.token_ids)
        assert (new - torch.tensor(after.logprobs)).abs().max().item() < 1e-5
        assert after.versions == [1] * len(after.token_ids)
        old = forward_logprobs(policy, ids, after.token_ids)
        assert (old - torch.tensor(after.logprobs)).abs().max().item() > 1e-3
    finally:  # the module's engine serves the fixture's policy again
        engine.load_weights(policy)
        engine.version = 0
    back = engine.generate_batch([ids], params)[0]
    assert back.token_ids == before.token_ids and back.logprobs == before.logprobs


def test_a_push_mid_request_goes_on_with_the_new_weights(engine, policy, load_vllm_tiny,
                                                         vllm_tokenizer) -> None:
    """A partial rollout: the tokens sampled before the push keep the old weights' log-probs
    and version, the rest are sampled from the new weights (and say so)."""
    ids = prompt(vllm_tokenizer, "tell me more")
    # the model was trained to answer briefly: a hot temperature and 64 seeds find a reply
    # long enough to be cut by a push (a seeded request samples the same tokens every time)
    params = [SamplingParams(max_new_tokens=40, temperature=1.5, seed=s) for s in range(64)]
    lengths = [len(c.token_ids) for c in engine.generate_batch([ids] * 64, params)]
    long = params[max(range(64), key=lengths.__getitem__)]
    assert max(lengths) >= 12, lengths
    moved = load_vllm_tiny().eval()
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(torch.randn_like(p) * 0.05)

    async def play():
        task = asyncio.ensure_future(engine.generate(ids, long))
        while engine.stats["decode_tokens"] < decoded + 4:  # a few decoding steps
            await asyncio.sleep(0)
        engine.load_weights(moved)
        engine.version = 1
        return await task

    decoded = engine.stats["decode_tokens"]
    try:
        out = asyncio.run(play())
    finally:
        engine.load_weights(policy)
        engine.version = 0
    k = out.versions.index(1)
    assert 4 <= k < len(out.token_ids)
    assert out.versions == [0] * k + [1] * (len(out.token_ids) - k)
    got = torch.tensor(out.logprobs)
    old = forward_logprobs(policy, ids, out.token_ids, temperature=1.5)
    new = forward_logprobs(moved, ids, out.token_ids, temperature=1.5)
    assert (old[:k] - got[:k]).abs().max().item() < 1e-5
    assert (new[k:] - got[k:]).abs().max().item() < 1e-5


def test_one_engine_per_process(engine, policy, vllm_tokenizer) -> None:
    with pytest.raises(VLLMEngineError, match="already running in this process"):
        VLLMEngine(policy, eos_token_id=vllm_tokenizer.eos_token_id)


def test_multi_turn_prompts_hit_the_prefix_cache(engine, vllm_tokenizer) -> None:
    engine.step_metrics()
    ids = prompt(vllm_tokenizer, "a long conversation " * 20)
    first = engine.generate_batch([ids], SamplingParams(max_new_tokens=8, seed=1))[0]
    engine.generate_batch([ids + first.token_ids + ids[:40]],
                          SamplingParams(max_new_tokens=8, seed=1))
    metrics = engine.step_metrics()
    assert metrics["rollout/engine_requests"] == 2
    # the second prompt's first blocks (of 32 tokens) came from the cache
    assert 0.3 < metrics["rollout/prefix_cache_hit_rate"] < 0.6


def test_top_p_below_one_is_refused(engine, vllm_tokenizer) -> None:
    with pytest.raises(ValueError, match=r"top_p=0\.9.*top_p=1"):
        engine.generate_batch([prompt(vllm_tokenizer)], SamplingParams(top_p=0.9))


def test_a_torchvision_mismatch_says_what_to_uninstall() -> None:
    message = _explain(RuntimeError("operator torchvision::nms does not exist"))
    assert "pip uninstall -y torchvision torchaudio torchcodec" in message
