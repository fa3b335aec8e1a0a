"""What the agent tests share: a model server over the tiny random model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from turnrl.agents.protocol import Limits
from turnrl.agents.server import ModelServer
from turnrl.rollout.hf import HFEngine


@pytest.fixture(scope="module")
def tiny_server(load_tiny, tokenizer) -> Callable[..., Iterator[ModelServer]]:
    """``with tiny_server(max_context_tokens=..., max_calls=...) as server``: a running
    endpoint over a fresh copy of the tiny random model (8 new tokens per call at most)."""

    @contextmanager
    def serve(*, max_context_tokens: int, max_calls: int) -> Iterator[ModelServer]:
        model = load_tiny().eval()
        engine = HFEngine(model, eos_token_id=tokenizer.eos_token_id,
                          pad_token_id=tokenizer.pad_token_id, seed=0)
        with ModelServer(engine, tokenizer, model_name="policy", limits=Limits(max_tokens=8),
                         max_context_tokens=max_context_tokens, max_calls=max_calls) as server:
            yield server

    return serve
