"""The OpenAI-compatible endpoint over the vLLM engine, as ``turnrl train`` serves an agent
program with ``rollout.engine=vllm``: an agent's echoed conversation is one segment whose
tokens decode to what the model saw and whose sampled log-probs equal a forward pass."""

from __future__ import annotations

import httpx
import torch
from vllm_support import require_vllm

from turnrl.agents.protocol import Limits
from turnrl.agents.server import ModelServer
from turnrl.models.policy import token_logprobs

require_vllm()


def test_an_agents_calls_over_vllm_are_captured_token_exactly(engine, policy,
                                                              vllm_tokenizer) -> None:
    with ModelServer(engine, vllm_tokenizer, model_name="policy",
                     limits=Limits(max_tokens=16), max_context_tokens=2048,
                     max_calls=4) as server:
        key, session = server.open_session(seed=0)
        messages = [{"role": "user", "content": "What is 3+4?"}]
        with httpx.Client(base_url=server.url(key), timeout=60,
                          headers={"Authorization": f"Bearer {key}"}) as http:
            for follow_up in ("And 5+1?", "Thanks."):
                response = http.post("/chat/completions",
                                     json={"model": "policy", "messages": messages})
                assert response.status_code == 200, response.text
                content = response.json()["choices"][0]["message"]["content"]
                messages += [{"role": "assistant", "content": content},  # echoed unchanged
                             {"role": "user", "content": follow_up}]
        (segment,) = session.sampled_segments()
        assert segment.calls == [0, 1]  # the echo continued the ledger
        ledger = segment.ledger
        assert vllm_tokenizer.decode(ledger.token_ids, skip_special_tokens=False) == ledger.text
        ids = torch.tensor([ledger.token_ids])
        with torch.no_grad():
            want, _ = token_logprobs(policy, ids, torch.ones_like(ids), temperature=1.0)
        sampled = [i for i, m in enumerate(ledger.loss_mask) if m]
        assert sampled and ledger.loss_mask[0] == 0
        got = torch.tensor([ledger.logprobs[i] for i in sampled])
        assert torch.allclose(got, want[0, sampled], atol=1e-4), (got, want[0, sampled])
        server.close_session(key)
        assert server.sessions == {}


def test_a_stream_over_vllm_comes_as_sampled_and_adds_up_to_the_whole_reply(
        engine, vllm_tokenizer) -> None:
    """The vLLM engine reports each step's tokens (``on_tokens``): a streamed reply comes in
    several pieces that join to the reply the same seed gives whole."""
    import json

    from turnrl.rollout.engine import streams

    assert streams(engine)
    with ModelServer(engine, vllm_tokenizer, model_name="policy",
                     limits=Limits(max_tokens=24), max_context_tokens=2048,
                     open_access=True) as server, httpx.Client(timeout=60) as http:
        for seed in range(50):  # a seed whose reply runs to several characters
            ask = {"model": "policy", "seed": seed, "max_tokens": 24,
                   "messages": [{"role": "user", "content": "Count to twenty."}]}
            whole = http.post(server.url() + "/chat/completions", json=ask).json()
            if len(whole["choices"][0]["message"]["content"].strip()) >= 6:
                break
        pieces = []
        with http.stream("POST", server.url() + "/chat/completions",
                         json={**ask, "stream": True}) as reply:
            for line in reply.iter_lines():
                if line.startswith("data: {"):
                    choices = json.loads(line[6:])["choices"]
                    if choices and choices[0]["delta"].get("content"):
                        pieces.append(choices[0]["delta"]["content"])
        assert "".join(pieces) == whole["choices"][0]["message"]["content"]
        assert len(pieces) > 1
