"""Rewards: answer extraction, each built-in against hand-computed values, and combinations."""

from __future__ import annotations

import math
import sys
import textwrap
import threading

import numpy as np
import pytest

from turnrl.rewards import (
    REWARDS,
    CombinedReward,
    RewardSpecError,
    combine,
    count_tool_calls,
    evidence_texts,
    exact_match,
    f1,
    final_answer,
    format_reward,
    grounded,
    invalid_cost,
    length_penalty,
    load_reward,
    math_verify,
    normalize_answer,
    reference_answers,
    token_f1,
    tool_cost,
)
from turnrl.types import EpisodeCounts, Trajectory


def episode(*turns: tuple[str, str], sampled: int = 0, tool_calls: int | None = None,
            **info) -> Trajectory:
    """A trajectory whose transcript is ``turns`` of (role, content); ``sampled`` tokens;
    ``tool_calls`` as the runner would have counted them (None: not counted)."""
    return Trajectory(env_id="qa-v0", seed=7, group_id=0,
                      messages=[{"role": role, "content": text} for role, text in turns],
                      loss_mask=[1] * sampled + [0] * 3, info=dict(info),
                      counts=None if tool_calls is None else EpisodeCounts(tool_calls=tool_calls))


def reply(text: str, **info) -> Trajectory:
    return episode(("user", "Question?"), ("assistant", text), **info)


def test_builtins_are_registered():
    assert REWARDS.names() == ["exact_match", "f1", "format", "grounded", "invalid_cost",
                               "length_penalty", "math_verify", "tool_cost"]


# --------------------------------------------------------------------------- answers


@pytest.mark.parametrize(("text", "expected"), [
    ("  The Eiffel-Tower! ", "eiffeltower"),  # lower, drop '-' and '!', drop 'the'
    ("An apple, a day.", "apple day"),
    ("Theory of\tthe\nmind", "theory of mind"),  # 'the' only as a whole word
    ("", ""),
])
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_final_answer_prefers_the_env():
    traj = reply("I think it is Lyon", final_answer=" Paris ")
    assert final_answer(traj) == "Paris"
    assert final_answer(traj, pattern=r"is (\w+)") == "Paris"  # the env's answer wins


def test_final_answer_from_the_last_assistant_message():
    traj = episode(("user", "Q"), ("assistant", "first"), ("tool", "x"),
                   ("assistant", "  Answer: Paris\n"), ("user", "ok"))
    assert final_answer(traj) == "Answer: Paris"
    assert final_answer(episode(("user", "Q"))) is None


def test_final_answer_pattern_groups_and_last_match():
    traj = reply("Answer: Lyon. No wait. Answer: Paris.")
    assert final_answer(traj, pattern=r"Answer: (\w+)") == "Paris"  # group 1 of the last
    assert final_answer(traj, pattern=r"(Answer): (?P<answer>\w+)") == "Paris"  # named group
    assert final_answer(traj, pattern=r"Answer: \w+") == "Answer: Paris"  # whole match
    assert final_answer(traj, pattern=r"<answer>(.*)</answer>") is None
    multiline = reply("<answer>\nParis\n</answer>")
    assert final_answer(multiline, pattern=r"<answer>(.*)</answer>") == "Paris"  # DOTALL
    with pytest.raises(ValueError, match=r"reward 'f1': pattern '\(' is not a valid regular"):
        f1(traj, answer="x", pattern="(")


def test_reference_answers():
    assert reference_answers(reply("x", answer="Paris"), reward="f1") == ["Paris"]
    assert reference_answers(reply("x", answer=["Paris", 42]), reward="f1") == ["Paris", "42"]
    assert reference_answers(reply("x", answer="Paris"), "Lyon", reward="f1") == ["Lyon"]
    with pytest.raises(ValueError, match=r"reward 'exact_match' needs a reference answer, but "
                       r"episode 'qa-v0' \(seed 7\) has no info\['answer'\]"):
        exact_match(reply("Paris"))


# --------------------------------------------------------------------------- exact match, F1


@pytest.mark.parametrize(("prediction", "gold", "expected"), [
    ("The Paris.", "paris", 1.0),  # 'the' and '.' normalised away
    ("PARIS", ["Lyon", "paris"], 1.0),  # any reference counts
    ("Paris, France", "Paris", 0.0),  # extra tokens: not exact
    ("", "the", 1.0),  # both normalise to "" (SQuAD compares normalised strings)
])
def test_exact_match(prediction, gold, expected):
    assert exact_match(reply(prediction, answer=gold)) == expected


def test_exact_match_without_an_answer_scores_zero():
    assert exact_match(episode(("user", "Q")), answer="Paris") == 0.0
    assert exact_match(reply("I say Paris"), answer="paris", pattern=r"say (\w+)") == 1.0
    assert exact_match(reply("I say Paris"), answer="paris", pattern=r"answer (\w+)") == 0.0


@pytest.mark.parametrize(("prediction", "gold", "expected"), [
    # pred [paris, is, capital, of, france], gold [capital, city, of, france]: overlap 3,
    # P = 3/5, R = 3/4, F1 = 2·0.6·0.75/1.35 = 2/3
    ("Paris is the capital of France", "capital city of France", 2 / 3),
    # bags {x:2, y:1} and {x:1, y:2}: overlap min(2,1)+min(1,2) = 2, P = R = 2/3, F1 = 2/3
    ("x x y", "x y y", 2 / 3),
    # pred [paris] ⊂ gold [paris, france]: P = 1, R = 1/2, F1 = 2·0.5/1.5 = 2/3
    ("Paris", "Paris, France", 2 / 3),
    ("Lyon", "Paris", 0.0),  # no overlap
    ("the", "a", 1.0),  # both empty after normalisation
    ("the", "Paris", 0.0),  # one empty
])
def test_token_f1(prediction, gold, expected):
    assert token_f1(prediction, gold) == pytest.approx(expected)


def test_f1_takes_the_best_reference():
    # vs "Lyon": 0; vs "Paris, France": 2/3 (above); the best is 2/3
    assert f1(reply("Paris"), answer=["Lyon", "Paris, France"]) == pytest.approx(2 / 3)
    assert f1(reply("Paris", answer="paris")) == 1.0
    assert f1(episode(("user", "Q")), answer="Paris") == 0.0


# --------------------------------------------------------------------------- math


@pytest.mark.parametrize(("prediction", "gold", "expected"), [
    ("so the result is \\boxed{\\frac{1}{2}}", "0.5", 1.0),  # 1/2 = 0.5
    ("The answer is $\\frac{2}{4}$", "\\frac{1}{2}", 1.0),  # symbolic equality
    ("The answer is 42", "42", 1.0),
    ("The answer is 41", "42", 0.0),
    ("I cannot tell", "42", 0.0),  # no math in the prediction
    ("x = 3", ["5", "3"], 1.0),  # any reference counts
])
def test_math_verify(prediction, gold, expected):
    assert math_verify(reply(prediction, answer=gold)) == expected


def test_math_verify_rejects_an_unparseable_reference():
    with pytest.raises(ValueError, match="cannot parse the reference answer 'no math here'"):
        math_verify(reply("42"), answer="no math here")
    for text in ("Paris", "???"):  # words would only parse as a product of letters
        with pytest.raises(ValueError, match="cannot parse the reference answer"):
            math_verify(reply("42"), answer=text)


@pytest.mark.parametrize("gold", ["\\sqrt{2}", "\\pi", "\\frac{\\pi}{2}", "2\\sqrt{3}",
                                  "{1,2}", "\\{1,2\\}"])
def test_math_verify_reads_latex_references_without_delimiters(gold):
    # Math-Verify finds nothing in a bare "\\sqrt{2}" (or only the 2 of "2\\sqrt{3}"): the
    # reference is read as "$gold$", like dataset-v0's golds
    assert math_verify(reply(f"So the answer is \\boxed{{{gold}}}.", answer=gold)) == 1.0
    assert math_verify(reply(gold, answer=gold)) == 1.0  # a bare reply equal to the gold
    assert math_verify(reply("\\boxed{7}", answer=gold)) == 0.0
    assert math_verify(reply("2\\sqrt{3}", answer="2")) == 0.0  # read whole, not its 2


def test_math_verify_works_outside_the_main_thread():
    results = []
    worker = threading.Thread(target=lambda: results.append(
        math_verify(reply("\\boxed{3}", answer="3"))))
    worker.start()
    worker.join()
    assert results == [1.0]


# --------------------------------------------------------------------------- format


def test_format():
    pattern = r"<think>.*</think>\s*<answer>.*</answer>"
    assert format_reward(reply("<think>a\nb</think>\n<answer>42</answer>\n"),
                         pattern=pattern) == 1.0  # DOTALL, surrounding whitespace stripped
    assert format_reward(reply("Sure. <answer>42</answer>"), pattern="<answer>.*</answer>") \
        == 0.0  # fullmatch: the whole message
    assert format_reward(reply("Sure. <answer>42</answer>"), pattern="<answer>.*</answer>",
                         mode="search") == 1.0
    assert format_reward(episode(("user", "Q")), pattern=".*") == 0.0  # no assistant message
    with pytest.raises(ValueError, match="mode must be 'fullmatch' or 'search'"):
        format_reward(reply("x"), pattern="x", mode="match")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- costs


def test_tool_cost():
    assert tool_cost(reply("x", tool_calls=3)) == pytest.approx(-0.3)  # −0.1 · 3
    assert tool_cost(reply("x", tool_calls=3), cost=0.2, free_calls=1) == pytest.approx(-0.4)
    assert tool_cost(reply("x", tool_calls=3), free_calls=5) == 0.0
    # no recorded count: the tool messages are counted (2 here), −0.1 · 2
    traj = episode(("user", "Q"), ("assistant", "search[a]"), ("tool", "A"),
                   ("assistant", "search[b]"), ("tool", "B"), ("assistant", "done"))
    assert count_tool_calls(traj) == 2
    assert tool_cost(traj) == pytest.approx(-0.2)
    # a recorded count wins over the transcript (and an info key is not a count)
    assert count_tool_calls(episode(("user", "Q"), ("tool", "A"), tool_calls=5)) == 5
    assert count_tool_calls(episode(("user", "Q"), ("tool", "A"), tool_calls=0)) == 0
    assert count_tool_calls(episode(("user", "Q"), ("tool", "A"), calls=9)) == 1
    with pytest.raises(ValueError, match="must be >= 0"):
        tool_cost(traj, cost=-1.0)


@pytest.mark.parametrize(("calls", "kwargs"), [(3, {"free_calls": 5}), (0, {}),
                                               (2, {"cost": 0.0})])
def test_tool_cost_is_a_positive_zero_when_nothing_is_charged(calls, kwargs):
    cost = tool_cost(reply("x", tool_calls=calls), **kwargs)
    assert cost == 0.0 and math.copysign(1.0, cost) == 1.0  # not -0.0


def test_tool_cost_counts_the_answer_call_as_the_runner_does():
    """python-v0 solved by its oracle: python[...] then answer[...]. The runner sums the
    steps' info["tool_calls"] (2: the answer is a call); the transcript has one tool message
    (the answer's observation is a user message), which the fallback counts."""
    from turnrl.envs import make

    env = make("python-v0", tool_format="compact")
    messages, _ = env.reset(seed=0)
    calls = 0
    while (action := env.oracle_action()) is not None:
        result = env.step(action)
        calls += result.info["tool_calls"]
        messages += [{"role": "assistant", "content": action}, *result.observation]
    assert calls == 2 and [m["role"] for m in messages[2:]] == [
        "assistant", "tool", "assistant", "user"]
    recorded = Trajectory(env_id="python-v0", seed=0, group_id=0, messages=messages,
                          counts=EpisodeCounts(tool_calls=calls))
    assert count_tool_calls(recorded) == 2
    assert tool_cost(recorded, cost=0.1, free_calls=1) == pytest.approx(-0.1)  # answer free
    by_hand = Trajectory(env_id="python-v0", seed=0, group_id=0, messages=messages)
    assert count_tool_calls(by_hand) == 1  # documented: the answer is not a tool message
    assert tool_cost(by_hand, cost=0.1) == pytest.approx(-0.1)


def counted(invalid: int) -> Trajectory:
    return Trajectory(env_id="frozenlake-v0", seed=0, group_id=0,
                      messages=[{"role": "user", "content": "Go."}],
                      counts=EpisodeCounts(invalid_actions=invalid))


@pytest.mark.parametrize(("invalid", "kwargs", "expected"), [
    (3, {}, -0.3),  # −0.1 · 3
    (2, {"cost": 0.25}, -0.5),
    (1, {"cost": 1.0}, -1.0),
])
def test_invalid_cost(invalid, kwargs, expected):
    assert invalid_cost(counted(invalid), **kwargs) == pytest.approx(expected)


@pytest.mark.parametrize(("invalid", "kwargs"), [(0, {}), (4, {"cost": 0.0})])
def test_invalid_cost_is_a_positive_zero_when_nothing_is_charged(invalid, kwargs):
    cost = invalid_cost(counted(invalid), **kwargs)
    assert cost == 0.0 and math.copysign(1.0, cost) == 1.0


def test_invalid_cost_needs_the_runners_counts_and_a_sane_cost():
    with pytest.raises(ValueError, match=r"no counts .*EpisodeCounts\(invalid_actions=n\)"):
        invalid_cost(reply("fly"))
    with pytest.raises(ValueError, match=r"cost must be >= 0, got cost=-0\.1"):
        invalid_cost(counted(1), cost=-0.1)
    with pytest.raises(RewardSpecError, match="cost must be >= 0"):
        combine([{"name": "invalid_cost", "kwargs": {"cost": -1}}])


def test_invalid_cost_charges_the_replies_the_runner_counted(tokenizer):
    """frozenlake-v0 played by a scripted policy: "fly" twice, then valid moves. The runner
    counts the two unparsable replies; the combined reward charges them on the last turn."""
    from tests.unit.test_rollout_runner import PARAMS, ScriptedEngine

    from turnrl import envs
    from turnrl.rollout.runner import Runner

    replies = iter(["fly", "fly"])
    engine = ScriptedEngine(tokenizer, lambda text: next(replies, "up"))
    (traj,) = Runner(engine, tokenizer, PARAMS).collect(
        lambda: envs.make("frozenlake-v0"), [0], 1)
    assert traj.counts is not None and traj.counts.invalid_actions == 2
    total, parts = combine([{"name": "invalid_cost", "kwargs": {"cost": 0.5}}]).score(traj)
    assert parts == {"invalid_cost": -1.0} and total == pytest.approx(-1.0)


@pytest.mark.parametrize(("sampled", "kwargs", "expected"), [
    (80, {"budget": 100, "window": 200}, 0.0),  # under budget
    (100, {"budget": 100, "window": 200}, 0.0),  # exactly the budget
    (150, {"budget": 100, "window": 200}, -0.25),  # −1 · 50/200
    (300, {"budget": 100, "window": 200}, -1.0),  # 200/200: full
    (400, {"budget": 100, "window": 200}, -1.0),  # saturated
    (200, {"budget": 100, "window": 200, "max_penalty": 0.5}, -0.25),  # −0.5 · 100/200
])
def test_length_penalty(sampled, kwargs, expected):
    traj = reply("x", sampled=sampled)
    assert traj.num_sampled_tokens == sampled
    assert length_penalty(traj, **kwargs) == pytest.approx(expected)


def test_length_penalty_checks_its_settings():
    with pytest.raises(ValueError, match="window >= 1"):
        length_penalty(reply("x"), budget=10, window=0)


# --------------------------------------------------------------------------- grounded


def test_grounded_in_tool_results():
    base = [("user", "Capital of France?"), ("assistant", "search[capital of France]"),
            ("tool", "Paris is the capital and largest city of France.")]
    assert grounded(episode(*base, ("assistant", "The answer is Paris"))) == 0.0  # whole reply
    assert grounded(episode(*base, ("assistant", "Paris"))) == 1.0
    assert grounded(episode(*base, ("assistant", "the capital, and largest city"))) == 1.0
    assert grounded(episode(*base, ("assistant", "Lyon"))) == 0.0  # fabricated
    assert grounded(episode(*base, ("assistant", "Par"))) == 0.0  # whole tokens only
    assert grounded(episode(*base, ("assistant", "the"))) == 0.0  # empty after normalising
    assert grounded(episode(*base, ("assistant", "Answer: Paris")),
                    pattern=r"Answer: (\w+)") == 1.0


def test_grounded_ignores_echoes_after_the_final_reply_and_reads_info():
    traj = episode(("user", "Q"), ("assistant", "answer[Lyon]"), ("tool", "answered Lyon"),
                   final_answer="Lyon")
    assert evidence_texts(traj) == []  # the echo comes after the last assistant message
    assert grounded(traj) == 0.0
    traj.info["retrieved"] = ["Lyon is a city in France."]
    assert grounded(traj) == 1.0
    user_only = episode(("user", "Paris"), ("assistant", "Paris"))
    assert grounded(user_only) == 0.0
    assert grounded(user_only, roles=("user",)) == 1.0


# --------------------------------------------------------------------------- combine


def test_combine_weights_and_components():
    traj = reply("The Paris", answer="paris", tool_calls=2)
    reward = combine([
        {"name": "exact_match", "weight": 1.0},
        {"name": "tool_cost", "weight": 0.5, "kwargs": {"cost": 0.2}},
        {"name": "f1", "weight": 2, "label": "answer_f1"},
    ])
    assert isinstance(reward, CombinedReward)
    assert reward.labels == ["exact_match", "tool_cost", "answer_f1"]
    # exact_match 1.0; tool_cost −0.2 · 2 = −0.4; f1 1.0 → 1·1 + 0.5·(−0.4) + 2·1 = 2.8
    total, parts = reward.score(traj)
    assert total == pytest.approx(2.8)
    assert parts == pytest.approx({"exact_match": 1.0, "tool_cost": -0.4, "answer_f1": 1.0})
    assert reward(traj) == pytest.approx(2.8)


def test_combine_shorthands():
    assert combine("exact_match").labels == ["exact_match"]
    assert combine(["exact_match", {"name": "f1"}]).terms[1].weight == 1.0
    assert combine({"name": "format", "kwargs": {"pattern": "x"}})(reply("x")) == 1.0


@pytest.mark.parametrize(("spec", "message"), [
    ([], r"rewards: no rewards are configured"),
    (["exact_mach"], r"rewards\[0\]: unknown reward 'exact_mach'; did you mean 'exact_match'\?"),
    ([{"name": "f1", "weigth": 2}], r"rewards\[0\]: unknown key 'weigth'; did you mean "
                                    r"'weight'\?"),
    ([{"weight": 2}], r"rewards\[0\]: 'name' must be a reward name"),
    ([{"name": "f1", "weight": "high"}], r"rewards\[0\] \(f1\): 'weight' must be a finite "
                                         r"number, got 'high'"),
    ([{"name": "f1", "weight": math.nan}], r"'weight' must be a finite number"),
    ([{"name": "f1", "kwargs": ["x"]}], r"'kwargs' must be a mapping"),
    ([{"name": "length_penalty", "kwargs": {"budgt": 1, "window": 2}}],
     r"rewards\[0\] \(length_penalty\): unknown kwarg 'budgt'; did you mean 'budget'\?"),
    ([{"name": "length_penalty", "kwargs": {"budget": 1}}],
     r"missing required kwarg\(s\) 'window'; add them under 'kwargs'"),
    (["f1", {"name": "f1", "weight": 2}], r"rewards\[1\]: two rewards are labelled 'f1'"),
    ([42], r"rewards\[0\]: expected a reward name or a mapping"),
    (["not a path"], r"unknown reward 'not a path'"),
])
def test_combine_errors(spec, message):
    with pytest.raises(RewardSpecError, match=message):
        combine(spec)


def test_combine_names_the_config_location():
    with pytest.raises(RewardSpecError, match=r"^run\.yaml: rewards\[0\]: unknown reward"):
        combine(["exact_mach"], where="run.yaml: rewards")


# --------------------------------------------------------------------------- user functions


@pytest.fixture
def user_modules(tmp_path, monkeypatch):
    package = tmp_path / "myrewards"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "shaping.py").write_text(textwrap.dedent("""
        import numpy as np

        THRESHOLD = 3

        def brevity(trajectory, *, limit=10):
            return 1.0 if len(trajectory.messages[-1]["content"]) <= limit else 0.0

        def as_numpy(trajectory):
            return np.float32(0.5)

        def broken(trajectory):
            return float("nan")

        def wrong_type(trajectory):
            return "high"

        def no_trajectory(*, scale=1.0):
            return scale

        class Rewards:
            @staticmethod
            def constant(trajectory, value=0.25):
                return value
    """))
    (package / "explodes.py").write_text("raise RuntimeError('boom at import')\n")
    (package / "needs_dep.py").write_text("import surely_not_installed_pkg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [name for name in sys.modules if name.split(".")[0] == "myrewards"]:
        del sys.modules[name]


def test_user_functions_by_import_path(user_modules):
    reward = combine([
        {"name": "myrewards.shaping:brevity", "weight": 2.0, "kwargs": {"limit": 5}},
        {"name": "myrewards.shaping:Rewards.constant"},
        {"name": "myrewards.shaping:as_numpy"},
    ])
    assert reward.labels == ["brevity", "constant", "as_numpy"]
    # brevity: len("Paris") = 5 <= 5 → 1.0; constant 0.25; numpy 0.5 → 2·1 + 0.25 + 0.5
    total, parts = reward.score(reply("Paris"))
    assert total == pytest.approx(2.75)
    assert parts == {"brevity": 1.0, "constant": 0.25, "as_numpy": 0.5}
    assert load_reward("myrewards.shaping:brevity")(reply("too long a reply")) == 0.0


@pytest.mark.parametrize(("path", "message"), [
    ("myrewards.shapin:brevity", r"cannot import module 'myrewards.shapin' \(No module named "
                                 r"'myrewards.shapin'\); check the spelling"),
    ("nopackage.mod:fn", r"cannot import module 'nopackage.mod'"),
    ("myrewards.needs_dep:fn", r"importing module 'myrewards.needs_dep' failed because it "
                               r"needs 'surely_not_installed_pkg'"),
    ("myrewards.explodes:fn", r"importing module 'myrewards.explodes' raised RuntimeError: "
                              r"boom at import"),
    ("myrewards.shaping:brevty", r"'myrewards.shaping' has no attribute 'brevty'; did you "
                                 r"mean 'brevity'\?"),
    ("myrewards.shaping:Rewards.constnt", r"'myrewards.shaping:Rewards' has no attribute "
                                          r"'constnt'; did you mean 'constant'\?"),
    ("myrewards.shaping:THRESHOLD", r"is a int, not a function"),
    ("myrewards.shaping", r"is not a registered name nor an import path"),
])
def test_user_function_import_errors(user_modules, path, message):
    with pytest.raises(RewardSpecError, match=message):
        load_reward(path)
    if ":" in path:
        with pytest.raises(RewardSpecError, match=rf"^rewards\[0\]: reward '{path}'"):
            combine([path])


def test_user_function_signature_and_value_checks(user_modules):
    with pytest.raises(RewardSpecError, match="unknown kwarg 'limt'; did you mean 'limit'"):
        combine([{"name": "myrewards.shaping:brevity", "kwargs": {"limt": 3}}])
    with pytest.raises(RewardSpecError, match="must take the trajectory as its first"):
        combine(["myrewards.shaping:no_trajectory"])
    with pytest.raises(ValueError, match=r"reward 'broken' returned nan for episode 'qa-v0' "
                       r"seed 7; rewards must be finite"):
        combine(["myrewards.shaping:broken"])(reply("x"))
    with pytest.raises(ValueError, match=r"reward 'wrong_type' returned 'high' \(str\)"):
        combine(["myrewards.shaping:wrong_type"])(reply("x"))


def test_a_combined_reward_accepts_numpy_scalars():
    reward = combine([{"name": "exact_match"}])
    assert isinstance(reward(reply("a", answer="a")), float)
    assert float(np.float64(reward(reply("a", answer="b")))) == 0.0


@pytest.mark.parametrize(("entry", "expected"), [
    ({"name": "format", "kwargs": {"pattern": "(["}}, "not a valid regular expression"),
    ({"name": "format", "kwargs": {"pattern": "x", "mode": "match"}},
     "mode of this reward: expected one of 'fullmatch', 'search', got 'match'"),
    ({"name": "length_penalty", "kwargs": {"budget": -5, "window": 0}}, "budget >= 0"),
    ({"name": "tool_cost", "kwargs": {"cost": -1}}, "must be >= 0"),
])
def test_bad_settings_fail_when_the_config_is_combined(entry, expected) -> None:
    with pytest.raises(RewardSpecError, match=expected) as info:
        combine([entry], where="cfg.yaml: reward.terms")
    assert str(info.value).startswith(f"cfg.yaml: reward.terms[0] ({entry['name']}): ")
