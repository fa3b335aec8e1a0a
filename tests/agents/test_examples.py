"""The example agent programs of ``examples/agents`` (guess, calculator, search).

Their game and tool logic is right: each oracle transcript, replayed through a scripted
stand-in for the ``openai`` client, earns reward 1.0, and the agent sends exactly the
transcript's conversation (so the SFT demonstrations are what the agent shows the model);
replayed through the real endpoint it earns 1.0 as well. Run over the tiny random model, each
agent's runs become well-formed trajectories. The calculator evaluates arithmetic only. The
shipped data files load, and ``turnrl train`` runs the guess example.
"""

from __future__ import annotations

import json
import sys
from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from turnrl.agents.job import load_tasks
from turnrl.agents.protocol import Limits
from turnrl.agents.replies import Reply, reply_message, split_tool_calls
from turnrl.agents.runner import AgentRunner, to_result
from turnrl.agents.server import ModelServer
from turnrl.config import load_config
from turnrl.rollout.engine import Completion
from turnrl.train.loop import train
from turnrl.train.sft import conversations_to_trajectories, load_conversations

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
sys.path.insert(0, str(EXAMPLES))  # as PYTHONPATH=examples/agents does for turnrl train

import calculator_agent  # noqa: E402
import guess_agent  # noqa: E402
import search_agent  # noqa: E402

EXAMPLE_MODULES = [guess_agent, calculator_agent, search_agent]


def tasks_and_transcripts(module: Any, n: int) -> tuple[list[dict], list[list[dict]]]:
    """``n`` tasks of ``module`` and its oracle's transcripts of them, in the same order."""
    if module is guess_agent:
        return module.make_tasks(range(n)), module.oracle_transcripts(range(n))
    tasks = module.make_tasks(range(n))
    return tasks, module.oracle_transcripts(tasks)


# ------------------------------------------------------------------ a scripted client

def as_text(message: dict) -> tuple[str, str]:
    """A message as the model reads it in a transcript: its role and text, a tool call
    written back in the ``<tool_call>`` form the model wrote."""
    text = message.get("content") or ""
    for call in message.get("tool_calls") or []:
        body = {"name": call["function"]["name"],
                "arguments": json.loads(call["function"]["arguments"])}
        text += f"<tool_call>{json.dumps(body)}</tool_call>"
    return message["role"], text


class ScriptedClient:
    """A stand-in for ``openai.OpenAI``: ``chat.completions.create`` checks that the agent
    sent the transcript so far, then returns the transcript's next assistant message as a
    ``ChatCompletion``, its tool calls read out of the text as the endpoint reads them."""

    def __init__(self, transcript: list[dict]) -> None:
        self.transcript = transcript
        self.replies = [i for i, m in enumerate(transcript) if m["role"] == "assistant"]
        self.calls = 0
        self.call_ids: set[str] = set()
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, *, model: str, messages: list[dict], tools: list[dict] | None = None,
               **_: Any) -> ChatCompletion:
        assert model == "policy"
        at = self.replies[self.calls]
        assert [as_text(m) for m in messages] == [as_text(m) for m in self.transcript[:at]]
        for m in messages:
            if m["role"] == "tool":  # every tool result answers a call the agent was given
                assert m["tool_call_id"] in self.call_ids
        self.calls += 1
        content, tool_calls = split_tool_calls(self.transcript[at]["content"], tools)
        self.call_ids |= {call["id"] for call in tool_calls or []}
        message = reply_message(Reply([], [], content, tool_calls,
                                      "tool_calls" if tool_calls else "stop"))
        return ChatCompletion.model_validate({
            "id": f"chatcmpl-{self.calls}", "object": "chat.completion", "created": 0,
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": "tool_calls" if tool_calls
                                         else "stop"}]})


@pytest.mark.parametrize("module", EXAMPLE_MODULES, ids=lambda m: m.__name__)
def test_each_oracle_transcript_replayed_earns_reward_one(module) -> None:
    tasks, transcripts = tasks_and_transcripts(module, 12)
    assert len(transcripts) == len(tasks)  # the oracle solves every one of these
    for task, transcript in zip(tasks, transcripts, strict=True):
        client = ScriptedClient(transcript)
        result = to_result(module.solve(client, task))
        assert client.calls == len(client.replies)  # the agent made every call, no more
        assert result.reward + sum(result.call_rewards or []) == 1.0
        assert result.success is not False


def test_guess_replays_imperfect_demonstrations_turn_for_turn() -> None:
    """With random replies among the oracle's, the agent still sends the transcript's
    conversation exactly, and wins exactly when the transcript ends ``Correct!``."""
    transcripts = guess_agent.oracle_transcripts(range(16), random_action_prob=0.4, seed=3)
    assert any(m.get("weight") == 0 for t in transcripts for m in t)
    for seed, transcript in enumerate(transcripts):
        result = guess_agent.solve(ScriptedClient(transcript), {"seed": seed})
        won = transcript[-1]["content"] == "Correct!"
        assert sum(result.call_rewards) == float(won) and result.success == won
        assert result.info["turns"] == sum(m["role"] == "assistant" for m in transcript)


def test_guess_tasks_pass_env_kwargs_to_the_game() -> None:
    """``env_kwargs`` in a task reach the env: with ``high=4`` the oracle's game (and the
    agent's replay of it) is over in at most 3 calls."""
    kwargs = {"high": 4}
    tasks = guess_agent.make_tasks(range(8), kwargs)
    transcripts = guess_agent.oracle_transcripts(range(8), env_kwargs=kwargs)
    for task, transcript in zip(tasks, transcripts, strict=True):
        assert "1 to 4" in transcript[1]["content"]
        result = guess_agent.solve(ScriptedClient(transcript), task)
        assert result.success and result.info["turns"] <= 3


def test_search_info_feeds_the_answer_rewards() -> None:
    tasks, transcripts = tasks_and_transcripts(search_agent, 4)
    for task, transcript in zip(tasks, transcripts, strict=True):
        result = search_agent.solve(ScriptedClient(transcript), task)
        assert result.info["final_answer"] == task["answers"][0]
        assert result.info["answer"] == task["answers"] and result.info["retrieved"]


# ------------------------------------------------------------------ the calculator's evaluator

@pytest.mark.parametrize(("expression", "value"), [
    ("12+7", "19"), ("(49-97)*9", "-432"), (" 7 / 2 ", "3.5"), ("-(3+4)*-2", "14"),
    ("6/3", "2"), ("1.5*4", "6"), ("((2))", "2"),
])
def test_the_calculator_evaluates_arithmetic(expression, value) -> None:
    assert calculator_agent.calculator(expression) == value


@pytest.mark.parametrize("expression", [
    "__import__('os').system('true')", "2**10", "a+1", "abs(-1)", "True+1", "'1'+'2'",
    "1 if 1 else 2", "(lambda: 1)()", "[1][0]", "1j*2", "7//2", "7%2", "1<2", "x:=1",
    "1+", "", "1\x00", "9" * 300,
])
def test_the_calculator_refuses_anything_but_arithmetic(expression) -> None:
    with pytest.raises(calculator_agent.CalculatorError):
        calculator_agent.evaluate(expression)
    assert calculator_agent.calculator(expression).startswith("error: ")


def test_the_calculator_tool_explains_bad_calls() -> None:
    assert calculator_agent.calculator("1/0") == "error: division by zero"
    assert calculator_agent.run_tool("search", "{}").startswith("error: there is no tool")
    assert calculator_agent.run_tool("calculator", '{"expr": "1"}').startswith("error: call")
    assert calculator_agent.run_tool("calculator", "[1]").startswith("error: call")
    assert calculator_agent.run_tool("calculator", '{"expression": "2*3"}') == "6"


# ------------------------------------------------------------------ data files

@pytest.mark.parametrize(("stem", "module"), [("guess", guess_agent),
                                              ("calculator", calculator_agent),
                                              ("search", search_agent)])
def test_the_shipped_data_loads_and_keeps_evaluation_held_out(stem, module, tokenizer) -> None:
    data = module.DATA
    tasks = load_tasks(str(data / f"{stem}_tasks.jsonl"), "agent.tasks")
    held_out = load_tasks(str(data / f"{stem}_eval_tasks.jsonl"), "agent.eval_tasks")
    key = "seed" if stem != "calculator" else "question"
    assert tasks and held_out and not {t[key] for t in tasks} & {t[key] for t in held_out}
    assert tasks[:5] == module.make_tasks([t.get("seed", i) for i, t in enumerate(tasks[:5])])
    conversations = load_conversations(data / f"{stem}_sft.jsonl")
    trajectories = conversations_to_trajectories(tokenizer, conversations[:8])
    assert all(sum(t.loss_mask) > 0 for t in trajectories)


# ------------------------------------------------------------------ through the endpoint

@pytest.fixture(scope="module")
def server(tiny_server):
    with tiny_server(max_context_tokens=2048, max_calls=16) as server:
        yield server


def collect(server, module, tasks, *, seeds, group_size):
    runner = AgentRunner(server, module.solve, tasks, name="agent-v0", timeout_s=60)
    try:
        return runner.collect(None, list(seeds), group_size)
    finally:
        runner.close()


@pytest.mark.parametrize("module", EXAMPLE_MODULES, ids=lambda m: m.__name__)
def test_each_example_runs_over_the_tiny_model(server, module) -> None:
    trajectories = collect(server, module, module.make_tasks(range(2)), seeds=[0, 1],
                           group_size=2)
    assert sorted({(t.seed, t.group_id) for t in trajectories}) == [(0, 0), (1, 1)]
    for t in trajectories:
        assert t.error is None and t.terminated and t.num_turns >= 1
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs) == len(t.turn_index)
        assert sum(t.loss_mask) >= t.num_turns and t.messages[-1]["role"] == "assistant"
        assert len(t.turn_rewards) == t.num_turns
    if module is guess_agent:  # replies echoed as returned: one token ledger per run
        assert len(trajectories) == 4
        for t in trajectories:
            assert t.info["segments"] == 1 and t.num_turns == t.info["turns"]
            assert sum(t.turn_rewards) == t.info["env_reward"]
    assert server.sessions == {}


class ScriptedEngine:
    """An engine whose replies are the given texts, in order (the oracle's turns)."""

    def __init__(self, tokenizer, replies: list[str]) -> None:
        self.tokenizer, self.replies = tokenizer, deque(replies)

    async def generate(self, prompt_ids, params, *, session=None) -> Completion:
        ids = [*self.tokenizer.encode(self.replies.popleft(), add_special_tokens=False),
               self.tokenizer.eos_token_id]
        return Completion(ids, [0.0] * len(ids), "stop")

    def load_weights(self, model) -> None:
        pass

    def end_session(self, session: str) -> None:
        pass


@pytest.mark.parametrize("module", EXAMPLE_MODULES, ids=lambda m: m.__name__)
def test_each_oracle_earns_reward_one_through_the_endpoint(tokenizer, module) -> None:
    """The oracle's turns sampled by the server: its tool-call parsing, the agent's tool
    handling and the capture agree with the transcript."""
    tasks, transcripts = tasks_and_transcripts(module, 1)
    replies = [m["content"] for m in transcripts[0] if m["role"] == "assistant"]
    engine = ScriptedEngine(tokenizer, replies)
    with ModelServer(engine, tokenizer, model_name="policy", limits=Limits(max_tokens=256),
                     max_context_tokens=4096) as scripted:
        trajectories = collect(scripted, module, tasks, seeds=[0], group_size=1)
    assert not engine.replies  # every oracle turn was asked for
    assert all(t.error is None and t.success for t in trajectories)
    # the outcome lands on every segment's last turn; the guess run is one segment (the
    # ChatML template renders a tool-call turn empty, so a tool call starts a new segment)
    assert sum(trajectories[-1].turn_rewards) == 1.0
    assert sum(t.num_turns for t in trajectories) == len(replies)
    if module is guess_agent:
        assert len(trajectories) == 1


# ------------------------------------------------------------------ turnrl train

def test_turnrl_train_runs_the_guess_example(tmp_path) -> None:
    data = guess_agent.DATA
    cfg = load_config(None, [
        "agent.entry_point=guess_agent:solve", f"agent.tasks={data / 'guess_tasks.jsonl'}",
        f"agent.eval_tasks={data / 'guess_eval_tasks.jsonl'}", "sft.enabled=false",
        "train.steps=1", "train.n_groups=2", "train.group_size=2", "train.mini_batch_size=4",
        "train.micro_batch_size=4", "eval.episodes=2", "rollout.max_new_tokens=4",
        "model.path=tiny-random", "model.tiny.hidden_size=32", "model.tiny.num_layers=1",
        "model.tiny.intermediate_size=64", "log.progress=false", "log.tensorboard=false",
        f"run.out_dir={tmp_path}"])
    result = train(cfg)
    records = [json.loads(line) for line in
               (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    (step,) = [r for r in records if r["phase"] == "train"]
    assert step["rollout/episodes"] == 4 and step["rollout/agent_error_rate"] == 0
    assert step["agent/segments_per_episode"] == 1
    assert step["loss/policy"] == step["loss/policy"]  # a number: the update ran
    assert [r for r in records if r["phase"] == "eval"]
