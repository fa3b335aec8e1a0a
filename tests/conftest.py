"""Shared fixtures: a tiny model built once per session, its tokenizer, a briefly
SFT-trained copy that ends its turns with EOS (so stop paths are exercised), and a real
tiny `turnrl train` run (``tiny_run``).

torch runs on one thread: per-op latency of these tiny models is much lower that way on
small CPU boxes, and the training loop's ``run.threads`` must not leak between tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from fixture_runs import TINY
from turnrl import envs
from turnrl.config import TinyConfig

torch.set_num_threads(1)

# tests/data holds test data, such as checkouts of generated repositories whose own tests fail
# on purpose (swe-local-v0's instances): never tests of turnrl's
collect_ignore = ["data"]

@pytest.fixture(autouse=True)
def _one_torch_thread():
    """The training loop sets torch threads from ``run.threads``; put it back after each test."""
    yield
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_config() -> TinyConfig:
    return TINY


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny model saved in the Hugging Face format (read-only!)."""
    from turnrl.models.tiny import init_tiny_model

    return init_tiny_model(tmp_path_factory.mktemp("tiny_model"), TINY)


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir: Path):
    from turnrl.models.policy import load_tokenizer

    return load_tokenizer(tiny_model_dir)


def _load(path: Path) -> torch.nn.Module:
    from turnrl.models.policy import load_policy

    return load_policy(path, dtype=torch.float32, device=torch.device("cpu"))


@pytest.fixture(scope="session")
def load_tiny(tiny_model_dir: Path) -> Callable[[], torch.nn.Module]:
    """A factory of fresh copies of the random tiny model (each test may train its own)."""
    return functools.partial(_load, tiny_model_dir)


@pytest.fixture(scope="session")
def sft_model_dir(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path,
                  tokenizer) -> Path:
    """The tiny model after a short SFT on oracle demos of both built-in envs.

    It answers in the envs' format (digits, move names) and ends most turns with EOS, which
    a random model almost never samples.
    """
    from turnrl.train import sft

    conversations = sft.oracle_demonstrations(
        functools.partial(envs.make, "arithmetic-v0"), range(96), random_action_prob=0.0)
    conversations += sft.oracle_demonstrations(
        functools.partial(envs.make, "frozenlake-v0"), range(12), random_action_prob=0.3)
    trajectories = sft.conversations_to_trajectories(tokenizer, conversations)
    policy = _load(tiny_model_dir)
    for _ in sft.sft_steps(policy, trajectories, pad_token_id=tokenizer.pad_token_id,
                           epochs=6, batch_size=16, lr=1.5e-2, max_grad_norm=1.0):
        pass
    out = tmp_path_factory.mktemp("sft_model")
    policy.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def load_sft(sft_model_dir: Path) -> Callable[[], torch.nn.Module]:
    return functools.partial(_load, sft_model_dir)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``turnrl train`` on :data:`TINY_RUN`: the run dir and what the command printed."""
    import contextlib
    import io

    from fixture_runs import TINY_RUN
    from turnrl.cli import main

    out, printed = tmp_path_factory.mktemp("runs"), io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["train", *TINY_RUN, f"run.out_dir={out}", "run.name=tiny"]) == 0
    return out / "tiny", printed.getvalue()
