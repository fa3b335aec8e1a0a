"""Agent programs in worker processes (``agent.workers``): runs there become the same
trajectories as in threads, in another process; a run that raises, times out, returns what
cannot be sent back, or kills its worker fails with a message that says so, and the others go
on; an agent the workers cannot load is refused at start; closing leaves no process."""

from __future__ import annotations

import os
import sys
import textwrap

import agent_programs
import pytest

from turnrl.agents.connection import CONNECTION, ERROR_KIND
from turnrl.agents.runner import AgentError, AgentRunner
from turnrl.agents.workers import AgentWorkers, WorkerError

TASKS = [{"question": "1+1", "answer": "2"}, {"question": "2+3", "answer": "5"}]


@pytest.fixture(scope="module")
def server(tiny_server):
    with tiny_server(max_context_tokens=256, max_calls=4) as server:
        yield server


def run(server, agent, *, processes=1, seeds=(0, 1), group_size=2, **kwargs):
    """``agent`` (a function of ``agent_programs``) run through ``processes`` workers; the
    trajectories; the workers are closed, their processes gone."""
    workers = AgentWorkers(f"agent_programs:{agent.__name__}", processes)
    runner = AgentRunner(server, agent, TASKS, name="agent-v0", workers=workers, **kwargs)
    try:
        return runner.collect(None, list(seeds), group_size, first_group_id=10)
    finally:
        runner.close()
        processes_ = [w.process for w in workers._workers]
        workers.close()
        assert all(p.poll() is not None for p in processes_)  # none left behind


def test_runs_in_workers_become_the_same_trajectories_in_other_processes(server) -> None:
    trajectories = run(server, agent_programs.two_calls, seeds=[0, 1], group_size=2)
    assert [(t.seed, t.group_id) for t in trajectories] == [(0, 10), (0, 10), (1, 11), (1, 11)]
    for t in trajectories:
        assert t.error is None and t.num_turns == 2 and t.turn_rewards == [0.25, 0.25]
        assert t.success and t.info["answer"] == TASKS[t.seed]["answer"]
        assert len(t.token_ids) == len(t.loss_mask) == len(t.logprobs)
    assert server.sessions == {}


@pytest.mark.parametrize("agent", [agent_programs.reports_pid,
                                   agent_programs.async_reports_pid])
def test_sync_and_async_agents_run_in_the_worker_processes(server, agent) -> None:
    trajectories = run(server, agent, processes=2, seeds=[0, 1], group_size=4)
    pids = {t.info["pid"] for t in trajectories}
    assert all(t.error is None for t in trajectories) and os.getpid() not in pids
    assert len(pids) == 2  # spread over both workers


@pytest.mark.parametrize(("agent", "says"), [
    (agent_programs.raises, "agent agent-v0 on task 0: ValueError: the agent broke on 1+1"),
    (agent_programs.returns_garbage, "AgentError: the agent returned 'great'"),
    (agent_programs.unpicklable_info, "cannot be sent back from its worker process"),
    (agent_programs.exits, "agent worker process 0 exited (code 3) during the run"),
])
def test_a_failed_run_in_a_worker_says_why(server, agent, says) -> None:
    (t,) = run(server, agent, seeds=[0], group_size=1)
    assert t.error is not None and says in t.error, t.error
    assert t.truncated and not t.success and t.token_ids == []
    assert server.sessions == {} and ERROR_KIND not in t.info


def test_a_run_in_a_worker_that_lost_its_connection_is_marked_as_such(server) -> None:
    (t,) = run(server, agent_programs.loses_connection, seeds=[0], group_size=1)
    assert t.error is not None and "APIConnectionError" in t.error
    assert t.info[ERROR_KIND] == CONNECTION


def test_a_worker_that_dies_fails_its_runs_and_with_none_left_calls_are_refused(server) -> None:
    workers = AgentWorkers("agent_programs:exits", 2)
    try:
        runner = AgentRunner(server, agent_programs.exits, TASKS, workers=workers)
        failed = runner.collect(None, [0], 2)  # one run per worker: both die
        assert all("exited (code 3)" in t.error for t in failed)
        with pytest.raises(WorkerError, match="every agent worker process has exited"):
            server.run(workers.call("http://x", "k", TASKS[0])).result(timeout=10)
    finally:
        workers.close()


def test_a_run_past_timeout_s_fails_and_closing_ends_its_worker(server) -> None:
    (t,) = run(server, agent_programs.sleeps, seeds=[0], group_size=1, timeout_s=0.5)
    assert t.error is not None and "agent.timeout_s" in t.error


def test_an_agent_the_workers_cannot_load_is_refused_at_start(tmp_path, monkeypatch) -> None:
    (tmp_path / "only_here.py").write_text(textwrap.dedent("""
        import os
        if os.environ.get("TURNRL_AGENT_WORKER"):
            raise RuntimeError("this module refuses worker processes")
        def solve(client, task):
            return 1.0
    """))
    monkeypatch.syspath_prepend(str(tmp_path))  # the workers get this sys.path
    with pytest.raises(AgentError, match="agent worker process 0: RuntimeError: this module "
                                         "refuses worker processes"):
        AgentWorkers("only_here:solve", 1)
    assert str(tmp_path) in sys.path
