"""``turnrl train`` on an agent program (``agent.entry_point``): it runs G copies per task
through the endpoint, trains on what they did, evaluates on held-out tasks and leaves no
server behind; settings an agent cannot use are refused before any run dir exists."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from turnrl.config import ConfigError, load_config
from turnrl.train.loop import train

TASKS = [{"question": f"{a}+{b}", "answer": str(a + b)} for a in range(3) for b in range(3)]


def write_tasks(path: Path, tasks: list[dict]) -> str:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    return str(path)


def overrides(tmp_path: Path, agent: str, *extra: str) -> list[str]:
    tasks = write_tasks(tmp_path / "tasks.jsonl", TASKS)
    return [f"agent.entry_point=agent_programs:{agent}", f"agent.tasks={tasks}",
            "sft.enabled=false", "train.steps=2", "train.n_groups=2", "train.group_size=3",
            "train.mini_batch_size=6", "train.micro_batch_size=6", "eval.episodes=4",
            "model.path=tiny-random", "model.tiny.hidden_size=32", "model.tiny.num_layers=1",
            "model.tiny.intermediate_size=64", "log.progress=false", "log.tensorboard=false",
            f"run.out_dir={tmp_path / 'runs'}", *extra]


def test_an_agent_program_trains_and_evaluates(tmp_path) -> None:
    threads = set(threading.enumerate())
    result = train(load_config(None, overrides(tmp_path, "two_calls")))
    records = [json.loads(line) for line in
               (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["phase"] == "train"]
    assert len(steps) == 2
    for r in steps:
        assert r["rollout/episodes"] == 6 and r["rollout/turns"] == 2
        assert r["rollout/agent_error_rate"] == 0 and r["agent/segments_per_episode"] == 1
        assert r["reward/mean"] == pytest.approx(0.5)  # 0.25 - 0.25 + 0.5 per run
        assert r["loss/policy"] == r["loss/policy"]  # a number: the update ran
    evals = [r for r in records if r["phase"] == "eval"]
    assert evals and all(r["eval/success"] == 1.0 and r["eval/turns"] == 2 for r in evals)
    deadline = time.monotonic() + 10  # an agent's thread ends just after handing its result
    while time.monotonic() < deadline and (leftover := {
            t for t in threading.enumerate() if t not in threads and t.is_alive()
            and t.name.startswith("turnrl")}):
        time.sleep(0.05)
    assert not leftover  # the server and the agents' threads are gone
    assert not worker_processes()  # and the agent's worker process (agent.workers=1)


def worker_processes() -> list[int]:
    """The pids of this process's children that are agent workers."""
    pids = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines()
                          if ":\t" in line)
            cmdline = (status.parent / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if int(fields.get("PPid", "0")) == os.getpid() and b"turnrl.agents.workers" in cmdline:
            pids.append(int(status.parent.name))
    return pids


def test_failed_agent_runs_are_left_out_and_counted(tmp_path) -> None:
    cfg = load_config(None, overrides(tmp_path, "raises", "env.max_failed_batches=1"))
    with pytest.raises(Exception, match=r"every episode of the last 1 batches failed.*agent-v0"):
        train(cfg)


@pytest.mark.parametrize(("extra", "says"), [
    (["sft.enabled=true"], "sft.source: an agent program has no oracle"),
    (["distributed.backend=ray"], "distributed.backend: agent programs run in this process"),
    (["agent.entry_point=agent_programs:nothing"], "agent.entry_point: "),
    (["agent.tasks=/no/such/tasks.jsonl"], "agent.tasks: dataset file"),
])
def test_settings_an_agent_cannot_use_are_refused_before_the_run(tmp_path, extra, says) -> None:
    cfg = load_config(None, overrides(tmp_path, "answer", *extra))
    with pytest.raises(ConfigError, match=says):
        train(cfg)
    assert not (tmp_path / "runs").exists()
