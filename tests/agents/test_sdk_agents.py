"""Agents written on each SDK train through the endpoint with no workaround: the openai SDK
(chat completions with tools), LangChain's ``ChatOpenAI.bind_tools``, the OpenAI Agents SDK
with its default model (the Responses API) and the anthropic SDK (the Messages API). Each
run trains, and its ledger holds: every reply the run trained on is a reply the agent was
given (the agent's own log of the texts it got against the run's saved samples), and the
learner's log-probs of the sampled tokens equal the sampling ones."""

from __future__ import annotations

import json

import pytest
from test_train_agent import overrides

from turnrl.config import load_config
from turnrl.models.tiny import build_tokenizer
from turnrl.train.loop import train

PROGRAMS = {"openai": "openai_tools", "langchain": "langchain_tools",
            "agents": "agents_sdk_tools", "anthropic": "anthropic_tools"}
NEEDS = {"langchain": "langchain_openai", "agents": "agents", "anthropic": "anthropic"}


def sampled_texts(trajectory: dict, tokenizer) -> list[str]:
    """The text of each run of sampled tokens (the replies), without the EOS token."""
    ids, mask = trajectory["token_ids"], trajectory["loss_mask"]
    spans, current = [], []
    for token, m in zip(ids, mask, strict=True):
        if m:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    if current:
        spans.append(current)
    return [tokenizer.decode([t for t in span if t != tokenizer.eos_token_id],
                             skip_special_tokens=False) for span in spans]


@pytest.mark.parametrize("sdk", list(PROGRAMS))
def test_an_agent_on_each_sdk_trains_and_its_ledger_holds(tmp_path, monkeypatch, sdk) -> None:
    if sdk in NEEDS:
        pytest.importorskip(NEEDS[sdk])
    log = tmp_path / "agent.jsonl"
    monkeypatch.setenv("TURNRL_AGENT_LOG", str(log))
    result = train(load_config(None, overrides(tmp_path, PROGRAMS[sdk])))
    records = [json.loads(line) for line in
               (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["phase"] == "train"]
    assert len(steps) == 2
    assert all(r["rollout/agent_error_rate"] == 0 and r["rollout/turns"] >= 1 and
               r["loss/policy"] == r["loss/policy"] for r in steps)
    given = {json.loads(line)["text"] for line in log.read_text().splitlines()}
    assert all(json.loads(line)["sdk"] == sdk for line in log.read_text().splitlines())
    tokenizer = build_tokenizer()
    trained = 0
    for path in sorted((result.run_dir / "samples").glob("step_*.jsonl")):
        for line in path.read_text().splitlines():
            trajectory = json.loads(line)
            texts = sampled_texts(trajectory, tokenizer)
            assert texts and set(texts) <= given, (texts, sorted(given)[:5])
            trained += len(texts)
            sampled = [i for i, m in enumerate(trajectory["loss_mask"]) if m]
            assert max(abs(trajectory["learner_logprobs"][i] - trajectory["logprobs"][i])
                       for i in sampled) < 1e-4
    assert trained >= 12  # 2 steps x 6 runs, each at least one call
