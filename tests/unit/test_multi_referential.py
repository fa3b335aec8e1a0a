"""referential-v0: a speaker describes a target object, a listener picks it."""

from __future__ import annotations

import random
import re

import pytest

from turnrl.envs.multi import check_multi_env, oracle_policy, play_episode, random_policy
from turnrl.envs.multi.referential import SPEC, WORDS, ReferentialGame

ORACLES = {"speaker": oracle_policy, "listener": oracle_policy}


def scripted(speaker: str, listener: str):
    return {"speaker": lambda env, agent: speaker, "listener": lambda env, agent: listener}


def description(episode) -> str:
    """The speaker's reply (its only assistant message)."""
    replies = [m["content"] for m in episode.conversations["speaker"]
               if m["role"] == "assistant"]
    assert len(replies) == 1
    return replies[0]


def test_spec_and_instance_spec() -> None:
    env = ReferentialGame(num_candidates=5, max_words=3)
    assert env.spec.id == "referential-v0" and env.spec.agents == ("speaker", "listener")
    assert env.spec.has_oracle and env.spec.max_turns == 2
    assert env.spec.kwargs == {"num_candidates": 5, "max_words": 3, "max_turns": 2,
                               "oracle_words": "fewest"}
    assert SPEC.kwargs == {"num_candidates": 3, "max_words": 4}


@pytest.mark.parametrize("num_candidates", [2, 3, 6])
def test_check_multi_env_passes(num_candidates: int) -> None:
    check_multi_env(ReferentialGame(num_candidates=num_candidates), seeds=range(5))


@pytest.mark.parametrize("oracle_words", ["fewest", "all"])
@pytest.mark.parametrize("num_candidates", [2, 3, 4, 5, 6])
def test_oracles_always_succeed(num_candidates: int, oracle_words: str) -> None:
    env = ReferentialGame(num_candidates=num_candidates, oracle_words=oracle_words)
    for seed in range(100):
        episode = play_episode(env, ORACLES, seed=seed)
        assert episode.outcomes == {"speaker": "success", "listener": "success"}, seed
        assert episode.returns == {"speaker": 1.0, "listener": 1.0}
        assert episode.invalid_actions == {"speaker": 0, "listener": 0}
        assert episode.steps == 2 and env.agents == []


@pytest.mark.parametrize("max_words", [3, 4])
def test_oracle_description_is_short_and_names_no_position(max_words: int) -> None:
    env = ReferentialGame(num_candidates=6, max_words=max_words)
    lengths = set()
    for seed in range(100):
        env.reset(seed=seed)
        text = env.oracle_action()
        assert text is not None
        words = text.split()
        lengths.add(len(words))
        assert 1 <= len(words) <= max_words
        assert not re.search(r"\d", text)
        assert set(words) <= set(WORDS)  # attribute words only: no "first", "left", ...
    assert lengths == {1, 2, 3}  # the fewest words: not always the full name


def test_oracle_speaker_uses_fewest_attributes_in_fixed_order() -> None:
    env = ReferentialGame()
    env.reset(seed=0)
    env._objects = [("big", "red", "star"), ("big", "blue", "star"), ("small", "red", "star")]
    env._target = ("big", "red", "star")
    assert env.oracle_action() == "big red"  # no single attribute singles it out
    env._target = ("small", "red", "star")
    assert env.oracle_action() == "small"  # size comes first among one-word descriptions


def test_prompts_stay_short_and_the_listener_sees_its_own_order() -> None:
    env = ReferentialGame(num_candidates=6, max_words=10)
    for seed in range(50):
        info = env.reset(seed=seed)
        env.step("small big red blue green yellow circle square triangle star")
        for agent in ("speaker", "listener"):
            assert all(len(m["content"]) < 400 for m in env.observe(agent))
        prompt = env.observe("listener")[-1]["content"]
        assert prompt.count("\n- ") == 6 and f"- {info['target']}\n" in prompt
    assert any(env.reset(seed=s)["candidates"] != [" ".join(o) for o in env._shown]
               for s in range(10))


def test_random_listener_succeeds_about_one_in_n() -> None:
    env = ReferentialGame(num_candidates=3)
    policies = {"speaker": oracle_policy, "listener": random_policy(random.Random(0))}
    wins = sum(play_episode(env, policies, seed=seed).outcomes["listener"] == "success"
               for seed in range(300))
    assert 0.2 < wins / 300 < 0.47  # 1/3 expected; the oracle listener would score 1.0


def test_random_speaker_replies_are_valid() -> None:
    env = ReferentialGame(max_words=4)
    policies = {"speaker": random_policy(random.Random(1)),
                "listener": random_policy(random.Random(2))}
    for seed in range(50):
        episode = play_episode(env, policies, seed=seed)
        assert episode.invalid_actions == {"speaker": 0, "listener": 0}
        assert 1 <= len(description(episode).split()) <= 4


@pytest.mark.parametrize("reply, relayed", [
    ("", ""),
    ("   ", ""),
    ("big red star and more", "big red star and"),
    ("the 2nd one", "the nd one"),
    ("3", ""),
])
def test_invalid_speaker_reply_is_flagged_and_relayed_cleaned(reply: str, relayed: str) -> None:
    env = ReferentialGame(num_candidates=3, max_words=4)
    env.reset(seed=4)
    result = env.step(reply)
    assert result.infos["speaker"]["invalid_action"] is True
    assert env.observe("speaker")[-1]["content"].startswith("Invalid")
    assert f'The speaker says: "{relayed}".' in env.observe("listener")[-1]["content"]
    assert env.agent_selection == "listener" and env.agents == ["speaker", "listener"]
    assert result.rewards == {"speaker": 0.0, "listener": 0.0}


def test_valid_speaker_reply_is_relayed_verbatim() -> None:
    env = ReferentialGame()
    env.reset(seed=4)
    result = env.step("Big, red!")
    assert result.infos["speaker"]["invalid_action"] is False
    assert 'The speaker says: "Big, red!".' in env.observe("listener")[-1]["content"]


@pytest.mark.parametrize("reply", ["7", "0", "abc", "", "1 2", "-", "99999999999"])
def test_invalid_listener_reply_fails_without_raising(reply: str) -> None:
    env = ReferentialGame(num_candidates=3)
    episode = play_episode(env, {"speaker": oracle_policy, "listener": lambda e, a: reply},
                           seed=0)
    assert episode.invalid_actions == {"speaker": 0, "listener": 1}
    assert episode.outcomes == {"speaker": "failure", "listener": "failure"}
    assert episode.returns == {"speaker": 0.0, "listener": 0.0}
    assert env.agents == []


@pytest.mark.parametrize("decorate", ["{}", " {}", "{}.", " ({}) ", "#{}!"])
def test_listener_number_may_carry_whitespace_and_punctuation(decorate: str) -> None:
    env = ReferentialGame(num_candidates=3)
    env.reset(seed=5)
    env.step(env.oracle_action() or "")
    right = env.oracle_action()
    assert right is not None
    number = [" ".join(o) for o in env._shown].index(right) + 1  # its place in the list
    result = env.step(decorate.format(number))
    assert result.infos["listener"] == {"outcome": "success", "invalid_action": False}
    assert result.rewards == {"speaker": 1.0, "listener": 1.0}
    assert all(result.terminations.values()) and not any(result.truncations.values())
    assert env.oracle_action() is None


def test_wrong_pick_is_a_failure_for_both() -> None:
    env = ReferentialGame(num_candidates=3)
    env.reset(seed=5)
    env.step(env.oracle_action() or "")
    right = [" ".join(o) for o in env._shown].index(env.oracle_action() or "") + 1
    result = env.step(str(right % 3 + 1))
    assert result.infos["listener"]["invalid_action"] is False
    assert result.infos["speaker"]["outcome"] == result.infos["listener"]["outcome"] == "failure"
    assert result.rewards == {"speaker": 0.0, "listener": 0.0}
    assert env.observe("speaker")[-1]["content"].startswith("Failure")


def test_oracle_listener_falls_back_to_a_seeded_pick_when_nothing_matches() -> None:
    picks = set()
    for seed in range(30):
        env = ReferentialGame(num_candidates=6)
        env.reset(seed=seed)
        env.step("purple hexagon")  # no attribute word: every candidate matches, the first
        assert env.oracle_action() == " ".join(env._shown[0])
        env.reset(seed=seed)
        env.step("small big")  # no candidate is both: the episode's seeded pick
        pick = env.oracle_action()
        assert pick == env.oracle_action()  # asking twice does not draw again
        picks.add(pick)
    assert len(picks) > 1


def test_same_seed_same_conversations() -> None:
    policies = {"speaker": random_policy(random.Random(3)),
                "listener": random_policy(random.Random(4))}
    first = play_episode(ReferentialGame(num_candidates=4), policies, seed=11)
    policies = {"speaker": random_policy(random.Random(3)),
                "listener": random_policy(random.Random(4))}
    again = play_episode(ReferentialGame(num_candidates=4), policies, seed=11)
    assert first.conversations == again.conversations and first.returns == again.returns
    other = play_episode(ReferentialGame(num_candidates=4), ORACLES, seed=12)
    assert other.conversations["speaker"][1] != first.conversations["speaker"][1]


def test_step_after_the_end_raises() -> None:
    env = ReferentialGame()
    env.reset(seed=0)
    env.step("red")
    env.step("1")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("1")


def test_oracle_speaker_with_all_words_names_the_target_as_listed() -> None:
    env = ReferentialGame(num_candidates=6, oracle_words="all")
    for seed in range(20):
        info = env.reset(seed=seed)
        assert env.oracle_action() == info["target"]  # three words: a copy of its name
    with pytest.raises(ValueError, match=r"oracle_words must be one of \('fewest', 'all'\), "
                       r"got 'some'"):
        ReferentialGame(oracle_words="some")


@pytest.mark.parametrize("kwargs, name", [
    ({"num_candidates": 1}, "num_candidates"),
    ({"num_candidates": 7}, "num_candidates"),
    ({"num_candidates": True}, "num_candidates"),
    ({"max_words": 2}, "max_words"),
    ({"max_words": "4"}, "max_words"),
    ({"max_turns": 1}, "max_turns"),
])
def test_kwargs_validation_names_the_kwarg(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=rf"{name} must be an int (in \[|>=)"):
        ReferentialGame(**kwargs)


@pytest.mark.parametrize("written", ["{}", "  {}. ", "{upper}"])
def test_the_listener_may_write_the_object_as_listed(written: str) -> None:
    """The listener's natural reply names the object (the base's `choose` skill)."""
    env = ReferentialGame(num_candidates=4)
    env.reset(seed=2)
    env.step(env.oracle_action() or "")
    right = env.oracle_action() or ""
    result = env.step(written.format(right, upper=right.upper()))
    assert result.infos["listener"] == {"outcome": "success", "invalid_action": False}
    env.reset(seed=2)
    env.step(env.oracle_action() or "")
    assert env.step("purple hexagon").infos["listener"]["invalid_action"] is True
