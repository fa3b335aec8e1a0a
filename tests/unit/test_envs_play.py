"""`turnrl play`: a person's actions from stdin, or the oracle, on a real env."""

from __future__ import annotations

import io

import pytest

from turnrl.cli import main
from turnrl.envs import make
from turnrl.envs.play import play


def scripted(actions: list[str]):
    queue = list(actions)

    def read(prompt: str) -> str:
        if not queue:
            raise EOFError
        return queue.pop(0)

    return read


def test_oracle_plays_a_solved_episode() -> None:
    shown: list[str] = []
    result = play(make("frozenlake-v0"), seed=3, oracle=True, show=shown.append)
    assert result.success and result.terminated and not result.stopped
    assert result.total_reward == 1.0
    assert sum(line.startswith("[assistant] ") for line in shown) == result.turns
    assert shown[-1] == f"-- success after {result.turns} turns, total reward 1"


def test_player_actions_drive_the_env_and_an_empty_line_stops() -> None:
    shown: list[str] = []
    result = play(make("frozenlake-v0"), seed=3, read=scripted(["down", "left", ""]),
                  show=shown.append)
    assert result.turns == 2 and result.stopped and not result.success
    assert shown[-1] == "-- stopped after 2 turns, total reward 0"
    # end of input stops as well
    assert play(make("frozenlake-v0"), seed=3, read=scripted([]), show=shown.append).stopped


def test_invalid_action_is_an_observation_not_a_crash() -> None:
    shown: list[str] = []
    result = play(make("frozenlake-v0"), seed=1, read=scripted(["jump"]), show=shown.append)
    assert result.turns == 1
    assert any("Invalid action" in line for line in shown)


def test_cli_play_with_oracle_and_kwargs(capsys) -> None:
    assert main(["play", "frozenlake-v0", "--seed", "2", "--oracle", "--kwarg", "max_size=4",
                 "--kwarg", "min_size=4"]) == 0
    out = capsys.readouterr().out
    assert "-- success after" in out and "[assistant]" in out


def test_cli_play_reads_stdin(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("7\n"))
    assert main(["play", "arithmetic-v0", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "-- " in out and "after 1 turns" in out


@pytest.mark.parametrize(("args", "expected"), [
    (["play", "frozenlake-v0", "--kwarg", "bogus=1"], ["--kwarg", "bogus", "accepts"]),
    (["play", "frozenlake-v0", "--kwarg", "nonsense"], ["expected key=value"]),
    (["play", "frozenlak-v0"], ["frozenlake-v0"]),
])
def test_cli_play_bad_arguments_exit_2(args: list[str], expected: list[str], capsys) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and all(part in err for part in expected), err


class _Closing:
    """Wraps an env, counting ``close`` calls; ``fail_on_step`` makes ``step`` raise."""

    def __init__(self, env, *, fail_on_step: bool = False) -> None:
        self.env, self.fail_on_step, self.closed = env, fail_on_step, 0
        self.spec = env.spec

    def reset(self, **kwargs):
        return self.env.reset(**kwargs)

    def step(self, action):
        if self.fail_on_step:
            raise RuntimeError("env broke")
        return self.env.step(action)

    def oracle_action(self):
        return self.env.oracle_action()

    def close(self) -> None:
        self.closed += 1
        self.env.close()


def test_the_env_is_closed_on_every_way_out() -> None:
    env = _Closing(make("frozenlake-v0"))
    play(env, seed=3, oracle=True, show=lambda text: None)
    assert env.closed == 1
    env = _Closing(make("frozenlake-v0"), fail_on_step=True)
    with pytest.raises(RuntimeError, match="env broke"):
        play(env, seed=3, read=scripted(["down"]), show=lambda text: None)
    assert env.closed == 1

    def interrupted(prompt: str) -> str:
        raise KeyboardInterrupt

    env = _Closing(make("frozenlake-v0"))
    with pytest.raises(KeyboardInterrupt):
        play(env, seed=3, read=interrupted, show=lambda text: None)
    assert env.closed == 1
