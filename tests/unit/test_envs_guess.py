"""guess-v0: a simulated user answers yes/no questions about a secret number or object."""

from __future__ import annotations

import random

import pytest
from env_episodes import play
from env_episodes import play_oracle as oracle_episode
from hypothesis import given, settings
from hypothesis import strategies as st

from turnrl.envs import check_env
from turnrl.envs.builtin.guess import (
    ATTRIBUTES,
    CORRECT_TEXT,
    SPEC,
    Guess,
    NumberSecrets,
    ObjectSecrets,
    describe,
    parse_object,
)

SEEDS = range(200)
NUMBER_INVALID = "Invalid. Ask >k? or <k?, or reply guess k."
OBJECT_INVALID = (
    "Invalid. Ask one value like red?, or reply guess with a size, colour and shape like "
    "guess big red star."
)
ALL_OBJECTS = [
    f"{size} {colour} {shape}"
    for size in ATTRIBUTES["size"]
    for colour in ATTRIBUTES["colour"]
    for shape in ATTRIBUTES["shape"]
]


def play_oracle(env, seed=None, secret=None):
    return oracle_episode(env, seed, None if secret is None else {"secret": secret})


def text(result):
    return result.observation[0]["content"]


def secret_of(env, seed=None):
    """Reset ``env`` (with ``seed``) and read its secret from ``privileged_info()``."""
    env.reset(seed=seed)
    return env.privileged_info().removeprefix("secret: ")


def game(secret, **kwargs):
    env = Guess(**kwargs)
    env.reset(seed=0, options={"secret": secret})
    return env


# -- the contract ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"high": 32}, {"high": 2, "max_turns": 2}, {"high": 1000, "max_turns": 11},
     {"mode": "object"}, {"mode": "object", "max_turns": 8}],
)
def test_check_env(kwargs):
    check_env(Guess(**kwargs), seeds=range(10))


def test_spec():
    assert SPEC.id == "guess-v0" and SPEC.max_turns == 10
    assert SPEC.entry_point == "turnrl.envs.builtin.guess:Guess"
    assert SPEC.has_oracle and SPEC.has_state_key and SPEC.has_privileged_info
    env = Guess(mode="object", max_turns=12)
    assert env.spec.max_turns == 12
    assert env.spec.kwargs == {"mode": "object", "high": 16, "max_turns": 12}


# -- the oracle -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs", [{}, {"high": 32}, {"high": 1000, "max_turns": 11}, {"mode": "object"}]
)
def test_oracle_always_succeeds(kwargs):
    env = Guess(**kwargs)
    for seed in SEEDS:
        result, transcript = play_oracle(env, seed)
        assert result.terminated and result.reward == 1.0 and result.info["success"], transcript
        assert text(result) == CORRECT_TEXT
        assert len(transcript) - 1 <= env.spec.max_turns


@pytest.mark.parametrize("high, needed", [(2, 2), (3, 3), (16, 5), (17, 6), (32, 6), (100, 8)])
def test_oracle_turns_are_binary_search(high, needed):
    env = Guess(high=high, max_turns=needed)
    turns = []
    for secret in range(1, high + 1):
        result, transcript = play_oracle(env, secret=secret)
        assert result.reward == 1.0, transcript
        assert transcript[-1][0] == f"guess {secret}"
        turns.append(len(transcript) - 1)
    assert max(turns) == needed  # ceil(log2(high)) questions and a guess, never more


def test_object_oracle_finds_every_object_within_eight_turns():
    env = Guess(mode="object", max_turns=8)
    turns = []
    for secret in ALL_OBJECTS:
        result, transcript = play_oracle(env, secret=secret)
        assert result.reward == 1.0 and transcript[-1][0] == f"guess {secret}", transcript
        turns.append(len(transcript) - 1)
        questions = [action for action, _ in transcript[1:-1]]
        assert all(q.endswith("?") and q[:-1] in sum(ATTRIBUTES.values(), ()) for q in questions)
    assert max(turns) == 8 and min(turns) == 4  # 3 + 3 + 1 questions at worst, 1 + 1 + 1 at best


def test_oracle_example_transcripts():
    _result, transcript = play_oracle(Guess(), secret=6)
    assert [action for action, _ in transcript[1:]] == [">8?", ">4?", ">6?", ">5?", "guess 6"]
    assert [text(r) for _, r in transcript[1:]] == ["no", "yes", "no", "yes", CORRECT_TEXT]
    _result, transcript = play_oracle(Guess(mode="object"), secret="small blue star")
    assert [action for action, _ in transcript[1:]] == [
        "red?", "green?", "blue?", "circle?", "square?", "triangle?", "small?",
        "guess small blue star",
    ]
    assert [text(r) for _, r in transcript[1:-1]] == ["no", "no", "yes", "no", "no", "no", "yes"]


def test_oracle_uses_answers_to_less_than_questions_too():
    env = game(11)
    env.step("<9?")  # no: 9..16
    env.step("<13?")  # yes: 9..12
    assert env.state_key() == (9, 10, 11, 12)
    assert env.oracle_action() == ">10?"


# -- reset, questions, guesses --------------------------------------------------------------


def test_reset_format():
    env = Guess()
    messages, info = env.reset(seed=0)
    assert messages == [
        {"role": "system",
         "content": "Find my secret number. Ask >k? or <k? (yes/no), then reply guess k."},
        {"role": "user", "content": "My number is 1 to 16."},
    ]
    assert info == {"candidates": 16}
    messages, info = Guess(mode="object").reset(seed=0)
    assert messages == [
        {"role": "system", "content": "Find my secret object. Ask a value like red? (yes/no), "
         "then reply guess size colour shape."},
        {"role": "user", "content": "My object is size: small big; colour: red green blue "
         "yellow; shape: circle square triangle star."},
    ]
    assert info == {"candidates": 32}


def test_secrets_are_uniform_and_seeded():
    env = Guess()
    assert {int(secret_of(env, s)) for s in SEEDS} == set(range(1, 17))
    env = Guess(mode="object")
    assert {secret_of(env, s) for s in range(400)} == set(ALL_OBJECTS)


def test_questions_are_answered_truthfully():
    env = game(7)
    replies = {">6?": "yes", ">7?": "no", "<7?": "no", "<8?": "yes", ">0?": "yes", "<99?": "yes"}
    for question, answer in replies.items():
        result = env.step(question)
        assert text(result) == answer
        assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert result.info == {"success": False, "invalid_action": False, "candidates": 1}
    env = game("big red star", mode="object")
    for question, answer in {"red?": "yes", "blue?": "no", "star?": "yes", "small?": "no"}.items():
        assert text(env.step(question)) == answer


def test_correct_guess():
    env = game(7)
    result = env.step("guess 7")
    assert result.observation == [{"role": "user", "content": "Correct!"}]
    assert (result.reward, result.terminated, result.truncated) == (1.0, True, False)
    assert result.info == {"success": True, "invalid_action": False, "candidates": 16}
    assert env.oracle_action() is None
    with pytest.raises(RuntimeError, match="reset"):
        env.step("guess 7")
    env = game("big red star", mode="object")
    assert env.step("guess star red big").reward == 1.0  # any order


@pytest.mark.parametrize(
    "mode, secret, reply, reveal",
    [("number", 7, "guess 8", "Wrong, it was 7."), ("number", 7, "guess 99", "Wrong, it was 7."),
     ("object", "big red star", "guess small red star", "Wrong, it was big red star.")],
)
def test_a_wrong_guess_ends_the_episode(mode, secret, reply, reveal):
    env = game(secret, mode=mode)
    result = env.step(reply)
    assert result.observation == [{"role": "user", "content": reveal}]
    assert (result.reward, result.terminated, result.truncated) == (0.0, True, False)
    assert result.info["success"] is False and result.info["invalid_action"] is False


@pytest.mark.parametrize("reply", ["> 8 ?", " >8? ", ">08?", "<8 ?", "GUESS 3", "guess   3\n"])
def test_number_grammar_tolerates_case_and_spaces(reply):
    result = game(3).step(reply)
    assert result.info["invalid_action"] is False


@pytest.mark.parametrize(
    "reply",
    ["", "%%%garbage%%%", ">8", "8", "8?", "=8?", ">=8?", "> -1?", "is it >8?", ">8??", "guess",
     "guess x", "guess 3 4", "guess3", "red?", "guess 12345678", ">12345678?", "yes"],
)
def test_number_invalid_replies(reply):
    env = game(3)
    result = env.step(reply)
    assert result.observation == [{"role": "user", "content": NUMBER_INVALID}]
    assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert result.info == {"success": False, "invalid_action": True, "candidates": 16}
    assert env.state_key() == tuple(range(1, 17))


@pytest.mark.parametrize("reply", ["red?", "RED ?", "  star?", "guess BIG red star", "big?"])
def test_object_grammar_tolerates_case_and_spaces(reply):
    assert game("big red star", mode="object").step(reply).info["invalid_action"] is False


@pytest.mark.parametrize(
    "reply",
    ["", "red", "purple?", "colour red?", "red blue?", ">8?", "guess red star", "guess 7",
     "guess big red blue", "guess big red star star", "guess big small star", "big red star"],
)
def test_object_invalid_replies(reply):
    env = game("big red star", mode="object")
    result = env.step(reply)
    assert result.observation == [{"role": "user", "content": OBJECT_INVALID}]
    assert (result.reward, result.terminated, result.truncated) == (0.0, False, False)
    assert result.info["invalid_action"] is True


def test_truncates_at_max_turns():
    env = Guess()
    env.reset(seed=0)
    results = [env.step(">3?" if turn % 2 else "nope") for turn in range(10)]
    assert [r.truncated for r in results] == [False] * 9 + [True]
    assert not any(r.terminated for r in results)
    assert results[-1].reward == 0.0 and results[-1].info["success"] is False
    with pytest.raises(RuntimeError, match="reset"):
        env.step("guess 1")


def test_determinism():
    env, other = Guess(high=32), Guess(high=32)
    actions = [">16?", "<4?", "what", ">20?", "guess 21"]
    for seed in range(30):
        first = play(env, seed, actions)
        assert play(other, seed, actions) == first
        assert play(env, seed, actions) == first
    env.reset(seed=3)
    first = [secret_of(env) for _ in range(5)]  # unseeded resets continue the seeded stream
    env.reset(seed=3)
    assert [secret_of(env) for _ in range(5)] == first


# -- state key, privileged info, sampling --------------------------------------------------


def test_state_key_is_the_knowledge_state():
    a, b = game(6), game(7)  # different secrets, same answers
    for env in (a, b):
        env.step(">4?")
        env.step("<8?")
    assert a.state_key() == b.state_key() == (5, 6, 7)
    c = game(5)  # the same knowledge reached another way
    c.step("<8?")
    c.step("oops")
    c.step(">2?")
    c.step(">4?")
    assert c.state_key() == a.state_key()
    assert repr(c.state_key()) == repr(a.state_key())  # stable_hash uses repr
    a.step(">6?")
    assert a.state_key() == (5, 6) != b.state_key()


def test_object_state_key():
    a, b = game("big red star", mode="object"), game("small red star", mode="object")
    for env in (a, b):
        env.step("red?")
        env.step("star?")
    assert a.state_key() == b.state_key() == (("big", "red", "star"), ("small", "red", "star"))
    c = game("small red star", mode="object")
    c.step("star?")
    c.step("red?")
    assert repr(c.state_key()) == repr(a.state_key())
    assert list(a.state_key()) == sorted(a.state_key())
    hash(a.state_key())


@pytest.mark.parametrize("mode", ["number", "object"])
def test_privileged_info_before_reset_says_there_is_no_secret(mode):
    env = Guess(mode=mode)
    assert env.privileged_info() == "no secret yet"
    env.reset(seed=0)
    assert env.privileged_info().startswith("secret: ")


def test_privileged_info_names_the_secret():
    assert game(11).privileged_info() == "secret: 11"
    env = game("Star  RED big", mode="object")
    assert env.privileged_info() == "secret: big red star"
    env.step("red?")
    assert env.privileged_info() == "secret: big red star"  # the secret never changes
    env.reset(seed=0, options={"secret": "small blue star"})
    assert env.privileged_info() == "secret: small blue star"
    assert env.spec.has_privileged_info


def test_sample_action_uses_the_callers_rng():
    for mode in ("number", "object"):
        env = Guess(mode=mode)
        env.reset(seed=0)
        samples = [env.sample_action(random.Random(s)) for s in range(200)]
        assert samples == [env.sample_action(random.Random(s)) for s in range(200)]
        assert any(s.startswith("guess ") for s in samples)
        assert sum(s.endswith("?") for s in samples) > 120
        for sample in samples:  # every sample is well formed
            env.reset(seed=0)
            assert env.step(sample).info["invalid_action"] is False, sample


def test_helpers():
    assert parse_object("red star big") == ("big", "red", "star")
    assert parse_object("red star") is None and parse_object("red star big big") is None
    assert describe(11) == "11" and describe(("big", "red", "star")) == "big red star"
    assert len(ObjectSecrets().all()) == 32 == len(set(ObjectSecrets().all()))
    assert NumberSecrets(16).worst_case_turns() == 5 and ObjectSecrets().worst_case_turns() == 8


# -- properties -----------------------------------------------------------------------------

NUMBER_REPLIES = st.one_of(
    st.builds(lambda op, k: f"{op}{k}?", st.sampled_from("<>"), st.integers(0, 40)),
    st.builds(lambda k: f"guess {k}", st.integers(0, 40)),
    st.text(max_size=6),
)


@settings(max_examples=80, deadline=None)
@given(
    high=st.integers(2, 32),
    seed=st.integers(0, 10_000),
    replies=st.lists(NUMBER_REPLIES, max_size=12),
)
def test_answers_are_truthful_and_knowledge_only_shrinks(high, seed, replies):
    env = Guess(high=high)
    secret = int(secret_of(env, seed))
    for turn, reply in enumerate(replies, start=1):
        before = env.state_key()
        result = env.step(reply)
        key = env.state_key()
        assert secret in key and set(key) <= set(before) and list(key) == sorted(key)
        normal = "".join(reply.split())
        invalid = result.info["invalid_action"]
        if not invalid and normal[0] in "<>":
            bound, above = int(normal[1:-1]), normal[0] == ">"
            truth = secret > bound if above else secret < bound
            assert text(result) == ("yes" if truth else "no")
            assert key == tuple(c for c in before if (c > bound if above else c < bound) == truth)
        else:
            assert key == before
        assert result.terminated == (not invalid and normal.startswith("guess"))
        assert result.reward == (1.0 if result.info["success"] else 0.0)
        assert result.info["success"] == (result.terminated and normal == f"guess{secret}")
        if result.terminated or result.truncated:
            assert turn <= env.spec.max_turns
            assert result.truncated == (turn == env.spec.max_turns and not result.terminated)
            break


@settings(max_examples=60, deadline=None)
@given(
    secret=st.sampled_from(ALL_OBJECTS),
    questions=st.lists(st.sampled_from(sum(ATTRIBUTES.values(), ())), max_size=9),
)
def test_object_answers_are_truthful(secret, questions):
    env = game(secret, mode="object", max_turns=20)
    for question in questions:
        result = env.step(f"{question}?")
        assert text(result) == ("yes" if question in secret.split() else "no")
        assert tuple(secret.split()) in env.state_key()
        assert not result.terminated and not result.truncated
    # whatever was asked, the oracle finishes from here
    while (action := env.oracle_action()) is not None:
        result = env.step(action)
    assert result.terminated and result.info["success"]


# -- misuse ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"mode": "colour"}, r"mode must be one of \('number', 'object'\), got 'colour'"),
        ({"high": 1}, r"high must be an int in \[2, 1000000\], got 1"),
        ({"high": 16.0}, "high must be an int"),
        ({"high": True}, "high must be an int"),
        ({"high": 10**7}, "high must be an int"),
        ({"max_turns": 4}, "max_turns=4 is too short for high=16 .*raise max_turns to >= 5 or "
                           "lower high"),
        ({"high": 1000}, "max_turns=10 is too short for high=1000 .*>= 11"),
        ({"mode": "object", "max_turns": 7}, "too short for mode='object' .*>= 8"),
    ],
)
def test_constructor_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Guess(**kwargs)


def test_bad_reset_options():
    env = Guess()
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"number": 3})
    for bad in (0, 17, "3", 2.0, True):
        with pytest.raises(ValueError, match=r"secret must be an int in \[1, 16\]"):
            env.reset(options={"secret": bad})
    env = Guess(mode="object")
    for bad in ("big red", "huge red star", 3):
        with pytest.raises(ValueError, match="must name one size, colour and shape"):
            env.reset(options={"secret": bad})
