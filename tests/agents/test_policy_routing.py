"""The endpoint routes each call by its ``model`` to the policy of that name (separate
policies, ``multi.policies``): each policy samples its own replies, each keeps its own
ledgers, and one agent program with two roles trains two policies in one run."""

from __future__ import annotations

import json

import openai
import pytest
import torch
from test_server import SYSTEM, check_ledger, client_for
from test_train_agent import overrides

from turnrl.agents.protocol import Limits
from turnrl.agents.server import ModelServer
from turnrl.config import ConfigError, load_config
from turnrl.rollout.hf import HFEngine
from turnrl.train.loop import train

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def models(load_tiny):
    planner, executor = load_tiny().eval(), load_tiny().eval()
    with torch.no_grad():  # two different policies
        for p in executor.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return planner, executor


@pytest.fixture(scope="module")
def server(models, tokenizer):
    engines = [HFEngine(m, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id, seed=0) for m in models]
    with ModelServer(engines[0], tokenizer, model_name="policy", limits=Limits(max_tokens=8),
                     max_context_tokens=512, engines={"executor": engines[1]}) as server:
        yield server


def test_each_call_is_answered_by_the_policy_it_names(server, models, tokenizer) -> None:
    planner, executor = models
    key, session = server.open_session()
    client = client_for(server, key)
    messages = [SYSTEM, {"role": "user", "content": "3+4"}]
    try:
        plan = client.chat.completions.create(model="policy", messages=messages, seed=1)
        # the same conversation, continued by the executor: a ledger of its own
        messages += [plan.choices[0].message.model_dump(exclude_none=True),
                     {"role": "user", "content": "now do it"}]
        done = client.chat.completions.create(model="executor", messages=messages, seed=2)
        messages += [done.choices[0].message.model_dump(exclude_none=True),
                     {"role": "user", "content": "check"}]
        again = client.chat.completions.create(model="policy", messages=messages, seed=3)
    finally:
        server.close_session(key)
    assert (plan.model, done.model, again.model) == ("policy", "executor", "policy")
    segments = session.sampled_segments()
    by_model = {}
    for segment in segments:
        by_model.setdefault(segment.model, []).append(segment)
    assert sorted(by_model) == ["executor", "policy"]
    # the executor's call never extends the planner's ledger, nor the planner's the executor's
    assert [s.calls for s in by_model["executor"]] == [[1]]
    assert all(1 not in s.calls for s in by_model["policy"])
    for segment in by_model["policy"]:  # each sampled by its own weights
        check_ledger(segment, planner, tokenizer)
    (mine,) = by_model["executor"]
    check_ledger(mine, executor, tokenizer)
    with pytest.raises(AssertionError):  # not the planner's log-probs
        check_ledger(mine, planner, tokenizer)


def test_the_models_list_and_unknown_names_cover_every_policy(server) -> None:
    key, _ = server.open_session()
    try:
        client = client_for(server, key)
        assert [m.id for m in client.models.list().data] == ["policy", "executor"]
        with pytest.raises(openai.NotFoundError) as missing:
            client.chat.completions.create(model="critic", max_tokens=2,
                                           messages=[{"role": "user", "content": "x"}])
    finally:
        server.close_session(key)
    assert missing.value.body["code"] == "model_not_found"
    assert "serves 'policy', 'executor'" in missing.value.body["message"]


def test_an_agent_program_with_two_roles_trains_two_policies(tmp_path) -> None:
    result = train(load_config(None, overrides(
        tmp_path, "plan_and_execute", "multi.policies=[executor]", "train.save_samples=64",
        "algo.entropy_coef=0.01", "train.checkpoint_every=2")))
    rows = [json.loads(line) for line in
            (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["phase"] == "train"]
    assert len(steps) == 2
    for row in steps:  # each policy updated on its own calls
        assert row["loss/optimizer_steps"] > 0
        assert row["policy/executor/loss/optimizer_steps"] > 0
        assert row["policy/executor/rollout/reward"] == pytest.approx(1.0)
    samples = [json.loads(line) for line in
               (result.run_dir / "samples" / "step_1.jsonl").read_text().splitlines()]
    assert samples and all("policy" not in s for s in samples)  # main's batch: the planner's
    assert all(s["messages"][0]["content"].startswith("plan:") for s in samples)
    step = result.run_dir / "checkpoints" / "step_2"
    assert (step / "policies" / "executor" / "model.safetensors").is_file()


def test_a_policy_named_like_the_served_model_is_refused(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"multi.policies: 'policy' cannot name a policy"):
        train(load_config(None, overrides(tmp_path, "plan_and_execute",
                                          "multi.policies=[policy]")))
    with pytest.raises(ConfigError, match=r"multi.agents: an agent program has no agents"):
        train(load_config(None, overrides(tmp_path, "plan_and_execute",
                                          "multi.agents={x: oracle}")))
