"""Agent programs run on tasks through the endpoint: their runs become trajectories (one per
segment, grouped by task, rewarded as they say), and a run that fails, times out, never calls
the model or returns garbage is a failed episode with a message that says why."""

from __future__ import annotations

import agent_programs
import pytest

from turnrl.agents.connection import CONNECTION, ERROR_KIND
from turnrl.agents.runner import AgentError, AgentRunner, load_agent, to_result

TASKS = [{"question": "1+1", "answer": "2"}, {"question": "2+3", "answer": "5"}]


@pytest.fixture(scope="module")
def server(tiny_server):
    with tiny_server(max_context_tokens=256, max_calls=4) as server:
        yield server


def run(server, agent, *, seeds=(0, 1), group_size=2, **kwargs):
    runner = AgentRunner(server, agent, TASKS, name="agent-v0", **kwargs)
    try:
        return runner.collect(None, list(seeds), group_size, first_group_id=10)
    finally:
        runner.close()


def test_runs_become_grouped_trajectories_of_exact_tokens(server) -> None:
    trajectories = run(server, agent_programs.answer)
    assert [(t.seed, t.group_id) for t in trajectories] == [(0, 10), (0, 10), (1, 11), (1, 11)]
    for t in trajectories:
        assert t.error is None and t.terminated and t.num_turns == 1
        assert t.turn_rewards in ([0.0], [1.0]) and t.success == (t.turn_rewards == [1.0])
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs) == len(t.turn_index)
        assert sum(t.loss_mask) >= 1 and t.messages[-1]["role"] == "assistant"
        assert TASKS[t.seed]["question"] in t.messages[0]["content"]
        assert t.policy_versions == [0] * sum(t.loss_mask)  # the engine's version, per token
    assert server.sessions == {}  # every run's session was closed


def test_per_call_rewards_and_the_outcome_land_on_their_turns(server) -> None:
    (t,) = run(server, agent_programs.two_calls, seeds=[1], group_size=1)
    assert t.num_turns == 2 and t.turn_rewards == [0.25, -0.25 + 0.5]
    assert t.success and t.info["answer"] == "5" and t.info["segments"] == 1


def test_rewards_keyed_by_reply_id_land_on_their_calls_whatever_the_order(server) -> None:
    for _ in range(3):  # the two calls race: whichever is answered first
        trajectories = run(server, agent_programs.concurrent_keyed, seeds=[0], group_size=1)
        assert len(trajectories) == 2  # one segment per conversation
        by_prompt = {t.messages[0]["content"].split()[0]: t for t in trajectories}
        assert by_prompt["first"].turn_rewards == [0.0]
        assert by_prompt["second"].turn_rewards == [1.0]


def test_a_refused_call_never_counts_in_call_rewards(server) -> None:
    (t,) = run(server, agent_programs.refused_then_answered, seeds=[0], group_size=1)
    assert t.error is None and t.turn_rewards == [1.0]


def test_call_rewards_that_cannot_be_placed_fail_the_run_and_say_why(server) -> None:
    (t,) = run(server, agent_programs.unknown_reply_id, seeds=[0], group_size=1)
    assert t.error is not None and "names response id(s) ['chatcmpl-not-mine']" in t.error


def test_a_list_of_call_rewards_needs_calls_that_never_overlapped(tokenizer) -> None:
    from turnrl.agents.capture import Session
    from turnrl.agents.runner import call_rewards

    session = Session(tokenizer, eos_token_id=tokenizer.eos_token_id)
    session.answered, session.response_ids = [1, 0], {"b": 1, "a": 0}
    assert call_rewards(session, [0.5, 1.0]) == {1: 0.5, 0: 1.0}  # in the order answered
    assert call_rewards(session, {"a": 2.0}) == {0: 2.0}
    session.overlapped = True  # two calls were in flight at once: a list is ambiguous
    with pytest.raises(AgentError, match=r"the agent's calls overlapped.*reply.id"):
        call_rewards(session, [0.5, 1.0])
    assert call_rewards(session, {"a": 2.0, "b": 3.0}) == {0: 2.0, 1: 3.0}


def test_discarded_replies_are_not_trained(server) -> None:
    (kept,) = run(server, agent_programs.best_of_two, seeds=[0], group_size=1)
    assert kept.messages[0]["content"].startswith("again")  # the first try is left out
    assert kept.turn_rewards == [1.0] and sum(kept.loss_mask) > 0
    (choice,) = run(server, agent_programs.two_choices_keep_one, seeds=[0], group_size=1)
    assert choice.info["segment"] == 0 and choice.turn_rewards == [1.0]
    (rewarded,) = run(server, agent_programs.discarded_but_rewarded, seeds=[0], group_size=1)
    assert rewarded.turn_rewards == [-1.0] and sum(rewarded.loss_mask) > 0  # its own reward
    (both,) = run(server, agent_programs.continued_discard_first, seeds=[0], group_size=1)
    trained_turns = {k for m, k in zip(both.loss_mask, both.turn_index, strict=True) if m}
    assert trained_turns == {1} and both.turn_rewards == [0.0, 1.0]  # turn 0 is context
    (t,) = run(server, agent_programs.discards_everything, seeds=[0], group_size=1)
    assert t.error is not None and "discarded every reply" in t.error


def test_an_async_agent_with_base_url_and_api_key(server) -> None:
    trajectories = run(server, agent_programs.async_answer, seeds=[0], group_size=3)
    assert len(trajectories) == 3
    assert all(t.error is None and not t.success and t.num_turns == 1 for t in trajectories)


def test_a_seeded_runs_samples_do_not_depend_on_the_other_runs(server) -> None:
    """With a seed, each run samples from (seed, task, group, member): the same run alone or
    among five others, arriving at other times and in other batches, samples the same
    tokens; its group mates sample their own."""
    (alone,) = run(server, agent_programs.two_calls, seeds=[1], group_size=1, seed=7)
    crowded = run(server, agent_programs.two_calls, seeds=[1, 0], group_size=3, seed=7)
    assert (crowded[0].seed, crowded[0].group_id) == (alone.seed, alone.group_id) == (1, 10)
    assert crowded[0].token_ids == alone.token_ids
    assert crowded[0].logprobs == pytest.approx(alone.logprobs, abs=1e-5)
    assert len({tuple(t.token_ids) for t in crowded[:3]}) > 1
    other_seed = run(server, agent_programs.two_calls, seeds=[1], group_size=1, seed=8)
    assert other_seed[0].token_ids != alone.token_ids


@pytest.mark.parametrize(("agent", "says"), [
    (agent_programs.raises, "ValueError: the agent broke on 1+1"),
    (agent_programs.never_calls, "never called the model"),
    (agent_programs.returns_garbage, "return a float reward"),
    (agent_programs.miscounts_calls, "call_rewards has 2 entries, but the agent made 1 "
                                     "answered model calls"),
])
def test_a_failed_run_is_a_failed_episode_that_says_why(server, agent, says) -> None:
    (t,) = run(server, agent, seeds=[0], group_size=1)
    assert t.error is not None and says in t.error and "task 0" in t.error
    assert t.truncated and not t.success and t.token_ids == []
    assert ERROR_KIND not in t.info  # the agent's own failure


def test_a_run_that_lost_its_connection_is_marked_as_such(server) -> None:
    (t,) = run(server, agent_programs.loses_connection, seeds=[0], group_size=1)
    assert t.error is not None and "APIConnectionError" in t.error
    assert t.info[ERROR_KIND] == CONNECTION and t.token_ids == []


@pytest.mark.parametrize("agent", [agent_programs.sleeps, agent_programs.async_sleeps])
def test_a_run_past_timeout_s_fails_and_the_others_go_on(server, agent) -> None:
    (t,) = run(server, agent, seeds=[0], group_size=1, timeout_s=0.5)
    assert t.error is not None and "agent.timeout_s" in t.error
    assert server.sessions == {}
    ok = run(server, agent_programs.answer, seeds=[0], group_size=1)
    assert ok[0].error is None


def test_results_are_checked() -> None:
    assert to_result(1).reward == 1.0 and to_result(True).reward == 1.0
    assert to_result({"reward": 0.5, "success": True}).success is True
    for bad, says in [("x", "return a float"), (float("nan"), "finite"),
                      ({"reward": 1, "bonus": 2}, "unknown key"),
                      ({"reward": 1, "call_rewards": [True]}, "call_rewards"),
                      ({"reward": 1, "call_rewards": {1: 0.5}}, "dict of reply id"),
                      ({"reward": 1, "call_rewards": "0.5"}, "call_rewards"),
                      ({"reward": 1, "discarded": "chatcmpl-1"}, "discarded must be a list")]:
        with pytest.raises(AgentError, match=says):
            to_result(bad)


@pytest.mark.parametrize(("entry_point", "says"), [
    ("agent_programs", "must be 'module:function'"),
    ("no_such_module_xyz:solve", "cannot import 'no_such_module_xyz'"),
    ("agent_programs:nothing", "has no 'nothing'"),
    ("agent_programs:not_callable", "is not callable"),
    ("agent_programs:needs_more", "parameter(s) ['budget'] cannot be given"),
])
def test_a_bad_entry_point_says_what_is_wrong(entry_point, says) -> None:
    with pytest.raises(AgentError, match=pytest.importorskip("re").escape(says)):
        load_agent(entry_point)


def test_an_agents_tool_calls_are_counted_and_shown() -> None:
    """The calls the server parsed from an agent's replies count as the env runner's do, and
    the viewers show them (an API reply's content is empty)."""
    from turnrl.agents.capture import Segment, called
    from turnrl.agents.runner import tool_counts
    from turnrl.report.episodes import api_call

    reply = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "search", "arguments": '{"q": "ada"}'}},
        {"id": "c2", "type": "function", "function": {"name": "add", "arguments": "{"}}]}
    assert called(reply) == ["search", "add"] and called(None) == []
    segment = Segment(ledger=None, tools=None, tool_calls=[called(reply), [], ["search"]])
    counts = tool_counts(segment)
    assert (counts.tool_calls, counts.tool_attempts, counts.valid_tool_calls) == (3, 2, 2)
    assert counts.tool_uses == {"search": 2, "add": 1}
    assert api_call(reply["tool_calls"][0]) == {"name": "search", "arguments": {"q": "ada"},
                                                "problem": None, "start": None, "end": None}
    assert api_call(reply["tool_calls"][1])["arguments"] == "{"  # as written, not JSON
