"""textworld-v0: generated TextWorld games (skipped unless ``turnrl[textworld]`` is installed).

Every test uses the same small game options and one cache folder, so each game is generated
and compiled (about 1 s) once for the whole file.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import threading
from pathlib import Path

import pytest

from turnrl.envs import check_env
from turnrl.envs.builtin import textworld_env
from turnrl.envs.builtin.textworld_env import (
    ADMISSIBLE_PREFIX,
    INSTRUCTION,
    META_REFUSAL,
    NO_RESPONSE,
    SEVERAL_REFUSAL,
    SPEC,
    TextWorldEnv,
    compact_feedback,
    normalize_command,
    why_refused,
)

SMALL = {"num_rooms": 2, "num_objects": 3, "quest_length": 3, "max_turns": 8}
ORACLE_SEEDS = range(12)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    pytest.importorskip("textworld")
    return str(tmp_path_factory.mktemp("textworld-games"))


@pytest.fixture
def env(cache_dir):
    env = TextWorldEnv(**SMALL, cache_dir=cache_dir)
    yield env
    env.close()


def play(env, seed, actions):
    """Reset on ``seed``, play ``actions`` (stopping at the end); the whole transcript."""
    messages, info = env.reset(seed=seed)
    transcript = [messages, info]
    for action in actions:
        result = env.step(action)
        transcript.append((action, result))
        if result.terminated or result.truncated:
            break
    return transcript


def play_oracle(env):
    results = []
    while (action := env.oracle_action()) is not None:
        results.append(env.step(action))
        if results[-1].terminated or results[-1].truncated:
            break
    return results


def test_oracle_wins_every_seed_within_the_walkthrough_length(env):
    for seed in ORACLE_SEEDS:
        _messages, info = env.reset(seed=seed)
        results = play_oracle(env)
        assert results[-1].terminated and results[-1].info["success"], (seed, info)
        assert len(results) <= len(info["walkthrough"]) <= SMALL["quest_length"]
        assert env.oracle_action() is None


def test_oracle_replans_after_the_agent_deviates(env):
    rng = random.Random(0)
    for seed in range(5):
        env.reset(seed=seed)
        env.step(env.sample_action(rng))
        env.step("%%%garbage%%%")
        results = play_oracle(env)
        assert results and results[-1].info["success"], seed


def test_check_env(env):
    check_env(env, seeds=(0, 1, 2), max_steps=4)


def test_same_seed_same_transcript_even_from_a_fresh_cache(env, tmp_path):
    actions = ["look", "%%%garbage%%%", "inventory", "quit", "go north", "take key"]
    first = play(env, 3, actions)
    assert play(env, 3, actions) == first
    fresh = TextWorldEnv(**SMALL, cache_dir=str(tmp_path))
    regenerated = play(fresh, 3, actions)
    fresh.close()
    assert regenerated[0] == first[0] and regenerated[2:] == first[2:]
    assert regenerated[1]["game_seed"] == first[1]["game_seed"]
    assert regenerated[1]["walkthrough"] == first[1]["walkthrough"]
    intros = {env.reset(seed=seed)[0][1]["content"] for seed in range(6)}
    assert len(intros) == 6


def test_reward_is_the_score_increment(env):
    for seed in range(4):
        env.reset(seed=seed)
        results = play_oracle(env)
        rewards = [result.reward for result in results]
        assert rewards == [0.0] * (len(rewards) - 1) + [1.0]
        assert [result.info["score"] for result in results] == [0] * (len(rewards) - 1) + [1]
        assert "*** The End ***" in results[-1].observation[0]["content"]


def test_prompt_is_compact_and_admissible_commands_only_when_asked(env, cache_dir):
    messages, info = env.reset(seed=0)
    assert messages[0] == {"role": "system", "content": INSTRUCTION}
    intro = messages[1]["content"]
    assert intro.startswith(info["objective"]) and "$$" not in intro and "\n\n\n" not in intro
    assert ADMISSIBLE_PREFIX not in intro
    shown = TextWorldEnv(**SMALL, cache_dir=cache_dir, show_admissible=True)
    messages, _ = shown.reset(seed=0)
    commands = shown.admissible_commands()
    assert "look" in commands and info["walkthrough"][0] in commands
    assert messages[1]["content"].endswith("\n\n" + ADMISSIBLE_PREFIX + ", ".join(commands))
    assert "available commands" in messages[0]["content"]
    results = play_oracle(shown)
    assert all(ADMISSIBLE_PREFIX in r.observation[0]["content"] for r in results[:-1])
    assert ADMISSIBLE_PREFIX not in results[-1].observation[0]["content"]
    shown.close()


def test_system_prompt_replaces_or_drops_the_system_message(env, cache_dir):
    messages, _ = env.reset(seed=0)
    bare = TextWorldEnv(**SMALL, cache_dir=cache_dir, system_prompt="")
    bare_messages, _ = bare.reset(seed=0)
    assert bare_messages == messages[1:] and bare.spec.kwargs["system_prompt"] == ""
    assert [r.observation for r in play_oracle(bare)] == [r.observation for r in play_oracle(env)]
    short = TextWorldEnv(**SMALL, cache_dir=cache_dir, system_prompt="Play.")
    assert short.reset(seed=0)[0] == [{"role": "system", "content": "Play."}, *messages[1:]]
    bare.close()
    short.close()


def test_meta_commands_and_several_commands_are_refused(cache_dir):
    env = TextWorldEnv(**{**SMALL, "max_turns": 12}, cache_dir=cache_dir)
    walkthrough = env.reset(seed=1)[1]["walkthrough"]
    refused = {
        "quit": META_REFUSAL.format(command="quit"),
        "  RESTART \n": META_REFUSAL.format(command="RESTART"),
        "again": META_REFUSAL.format(command="again"),
        "tw-trace-actions": META_REFUSAL.format(command="tw-trace-actions"),
        "look. restore": SEVERAL_REFUSAL.format(command="look. restore"),
        " then ".join(walkthrough): SEVERAL_REFUSAL.format(command=" then ".join(walkthrough)),
    }
    for reply, text in refused.items():
        result = env.step(reply)
        assert result.observation == [{"role": "user", "content": text}], reply
        assert result.info["invalid_action"] and result.reward == 0.0
    assert play_oracle(env)[-1].info["success"]  # nothing reached the game
    env.close()


def test_control_characters_never_reach_the_interpreter(env):
    env.reset(seed=1)
    command = env.oracle_action()
    assert normalize_command(command.replace(" ", "\x00\n", 1) + "\x1b") == command
    result = env.step(command.replace(" ", "\x00", 1))  # a NUL would crash the Z-machine
    assert result.info["admissible"] and not result.info["invalid_action"]
    # dumb-frotz escapes: "\\h" (its help) used to block the episode forever
    assert normalize_command("\\h " + command + "\\") == "h " + command
    result = env.step("\\h")
    assert "not a verb" in result.observation[0]["content"] or not result.info["admissible"]
    following = env.oracle_action()  # the game goes on; backslashes in a command are dropped
    assert env.step(following.replace(" ", "\\ ", 1) + "\\").info["admissible"]


def test_parser_errors_are_turns_and_the_budget_truncates(env):
    env.reset(seed=2)
    results = [env.step("%%%garbage%%%") for _ in range(SMALL["max_turns"])]
    assert "not a verb" in results[0].observation[0]["content"]
    assert not results[0].info["invalid_action"] and not results[0].info["admissible"]
    assert [r.truncated for r in results] == [False] * (SMALL["max_turns"] - 1) + [True]
    assert not any(r.terminated for r in results)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")


def test_state_key_follows_the_world_not_the_text(env):
    env.reset(seed=0)
    start = env.state_key()
    hash(start)
    env.step("look")
    assert env.state_key() == start
    env.step(env.oracle_action())
    assert env.state_key() != start
    assert env.privileged_info().startswith("plan: ")


def test_why_refused_and_compact_feedback():
    assert why_refused("quit") and why_refused("look then Save") and why_refused("g")
    assert why_refused("tw-extra-infos score") and why_refused("take key. go east")
    assert why_refused("take type Q latchkey") is None and why_refused("go north.") is None
    assert why_refused("take key, lamp") is None and why_refused("") is None
    # a "." is a full stop only before a word: not in a number, not at the end
    assert why_refused("examine 1.5") is None and why_refused("put 2.5 coins. ") is None
    assert why_refused("take key.go east") and why_refused("Take key.  Go east")
    assert why_refused("take key; go east") and why_refused("open door! go north")
    raw = ("\n\n   ____  __\n  |    \\|  \\\n   \\$$$$ $$\n\nWelcome!\n\n\n-= Den =-\nA den.  \n"
           "\n\n\n          *** The End ***\n\nYou scored 1 out of a possible 1\n\nWould you")
    assert compact_feedback(raw) == "Welcome!\n\n-= Den =-\nA den.\n\n*** The End ***"
    assert compact_feedback("\n \n") == NO_RESPONSE


def test_spec_declares_slow_steps():
    # reset may generate and compile a game (seconds): the runner must call it in threads
    assert SPEC.slow_steps


def test_build_locks_are_per_game_file(tmp_path):
    lock = textworld_env._build_lock(tmp_path / "a.z8")
    assert textworld_env._build_lock(tmp_path / "a.z8") is lock
    assert textworld_env._build_lock(tmp_path / "." / "a.z8") is lock  # same file, same lock
    assert textworld_env._build_lock(tmp_path / "b.z8") is not lock


def test_groups_resetting_in_threads_compile_each_game_once_and_play(tmp_path, monkeypatch):
    """Two groups (seeds 5 and 6) of three envs reset and play at once in threads, as the
    runner does with ``slow_steps``: each game is built once, and TextWorld (not
    thread-safe: a global logic parser) is never entered twice at a time."""
    pytest.importorskip("textworld")
    compiled: list[Path] = []
    real_compile = textworld_env._compile

    def counting_compile(tw, game, game_file):
        compiled.append(game_file)
        real_compile(tw, game, game_file)

    monkeypatch.setattr(textworld_env, "_compile", counting_compile)
    seeds = [5, 5, 5, 6, 6, 6]
    group = [TextWorldEnv(**SMALL, cache_dir=str(tmp_path)) for _ in seeds]
    start = threading.Barrier(len(group))
    outcomes: dict[int, tuple[str, bool]] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        env = group[index]
        try:
            start.wait()
            messages, _ = env.reset(seed=seeds[index])
            outcomes[index] = (messages[1]["content"], play_oracle(env)[-1].info["success"])
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(group))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for env in group:
        env.close()
    assert not errors, errors
    assert len(compiled) == len(set(compiled)) == 2
    assert all(won for _, won in outcomes.values()) and len(outcomes) == len(group)
    assert len({outcomes[i][0] for i in range(3)}) == 1  # one game per seed
    assert len({outcomes[i][0] for i in range(3, 6)}) == 1


def test_bad_arguments_say_how_to_fix_them():
    with pytest.raises(ValueError, match="raise max_turns to >= 3"):
        TextWorldEnv(quest_length=3, max_turns=2)
    with pytest.raises(ValueError, match="num_rooms must be an int >= 1, got 0"):
        TextWorldEnv(num_rooms=0)
    with pytest.raises(ValueError, match="textworld-v0: system_prompt must be a string"):
        TextWorldEnv(system_prompt=["play"])


def test_unknown_reset_option(env):
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(seed=0, options={"map": 1})


def test_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "textworld", None)  # makes `import textworld` fail
    with pytest.raises(ImportError, match=r"pip install 'turnrl\[textworld\]'"):
        TextWorldEnv()
    # The module itself imports without textworld (the import is inside the class).
    module_spec = importlib.util.spec_from_file_location("tw_copy", textworld_env.__file__)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    assert module.SPEC == SPEC
