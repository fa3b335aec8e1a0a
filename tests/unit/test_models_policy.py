"""Policy helpers: token log-probs, loading errors, the critic and its checkpoint round trip."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from turnrl.models.chat import encode
from turnrl.models.policy import (
    ModelLoadError,
    ValueModel,
    check_model_path,
    load_tokenizer,
    resolve_dtype,
    token_logprobs,
)
from turnrl.models.tiny import build_tokenizer

TEXT = "<|im_start|>user\n12+30=<|im_end|>\n<|im_start|>assistant\n42<|im_end|>\n"


@pytest.fixture(scope="module")
def model(load_tiny):
    return load_tiny().eval()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_token_logprobs_are_aligned_with_the_input(model, tokenizer, temperature) -> None:
    ids = torch.tensor([encode(tokenizer, TEXT)])
    with torch.no_grad():
        logprobs, entropy = token_logprobs(model, ids, torch.ones_like(ids),
                                           temperature=temperature, with_entropy=True)
        logits = model(ids).logits[0].float() / temperature
    dist = torch.log_softmax(logits, -1)
    assert logprobs.shape == entropy.shape == ids.shape
    assert logprobs[0, 0] == 0 and entropy[0, 0] == 0
    for t in range(1, ids.shape[1]):
        assert logprobs[0, t] == pytest.approx(dist[t - 1, ids[0, t]].item(), abs=1e-5)
        expected_entropy = -(dist[t - 1].exp() * dist[t - 1]).sum().item()
        assert entropy[0, t] == pytest.approx(expected_entropy, abs=1e-5)


def test_token_logprobs_ignore_right_padding(model, tokenizer) -> None:
    ids = encode(tokenizer, TEXT)
    short = encode(tokenizer, "<|im_start|>user\nhi")
    pad = tokenizer.pad_token_id
    batch = torch.tensor([ids, short + [pad] * (len(ids) - len(short))])
    mask = torch.tensor([[1] * len(ids), [1] * len(short) + [0] * (len(ids) - len(short))])
    with torch.no_grad():
        together, _ = token_logprobs(model, batch, mask)
        alone, _ = token_logprobs(model, torch.tensor([short]), torch.ones(1, len(short)))
    torch.testing.assert_close(together[1, : len(short)], alone[0], atol=1e-5, rtol=0)


def test_load_tokenizer_needs_a_chat_template(tmp_path: Path) -> None:
    tokenizer = build_tokenizer()
    tokenizer.chat_template = None
    tokenizer.save_pretrained(str(tmp_path))
    with pytest.raises(ModelLoadError, match="no chat template") as info:
        load_tokenizer(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_check_model_path_explains_a_bad_local_path(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        check_model_path(str(tmp_path / "missing"))
    with pytest.raises(ModelLoadError, match=r"has no config\.json"):
        check_model_path(str(tmp_path))
    check_model_path("Qwen/Qwen2.5-0.5B-Instruct")  # a hub id passes through


def test_resolve_dtype() -> None:
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("bfloat16", torch.device("cpu")) == torch.bfloat16


def _critic_round_trip(critic: ValueModel, path: Path, ids: torch.Tensor) -> None:
    with torch.no_grad():
        critic.head.weight.normal_()
        critic.head.bias.fill_(0.3)
        before = critic(ids, torch.ones_like(ids))
    critic.save_pretrained(path)
    loaded = ValueModel.from_pretrained(path, dtype=torch.float32, device=torch.device("cpu"))
    with torch.no_grad():
        after = loaded(ids, torch.ones_like(ids))
    torch.testing.assert_close(after, before, atol=1e-5, rtol=0)


def test_critic_starts_at_zero_and_round_trips_through_a_checkpoint(load_tiny, tokenizer,
                                                                    tmp_path: Path) -> None:
    policy = load_tiny()
    critic = ValueModel.from_policy(policy)
    ids = torch.tensor([encode(tokenizer, TEXT)])
    with torch.no_grad():
        assert torch.all(critic(ids, torch.ones_like(ids)) == 0)
    assert all(p.requires_grad for p in critic.parameters())
    # a copy, not a view: training the critic cannot move the policy
    critic_embed = critic.body.embed_tokens.weight
    assert critic_embed.data_ptr() != policy.model.embed_tokens.weight.data_ptr()
    _critic_round_trip(critic, tmp_path / "critic", ids)
    # from_policy with a checkpoint holding critic/ loads that critic
    resumed = ValueModel.from_policy(policy, source=tmp_path)
    torch.testing.assert_close(resumed.head.bias, torch.tensor([0.3]))


def test_critic_of_a_lora_policy_round_trips(load_tiny, tokenizer, tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model

    policy = get_peft_model(load_tiny(), LoraConfig(task_type="CAUSAL_LM", r=4,
                                                    target_modules=["q_proj", "v_proj"]))
    critic = ValueModel.from_policy(policy)
    _critic_round_trip(critic, tmp_path / "critic", torch.tensor([encode(tokenizer, TEXT)]))
