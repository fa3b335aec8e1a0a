"""dataset-v0: loading JSONL/JSON/CSV/Parquet/datasets dirs, math-verify and exact checking,
clear errors, and the bundled sample (regenerate it with
``python tests/unit/test_envs_dataset.py``)."""

from __future__ import annotations

import json
import operator
import random
import sys
import threading
from fractions import Fraction
from pathlib import Path

import pytest

from turnrl.envs import check_env, make
from turnrl.envs import registry as env_registry
from turnrl.envs.builtin.dataset import (
    SPEC,
    DatasetEnv,
    DatasetEnvError,
    exact_equal,
    looks_like_math,
    math_equal,
    normalize_answer,
    sample_path,
)

pytest.importorskip("math_verify")

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "src/turnrl/envs/builtin/data/sample_math.jsonl"
OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


# -- the bundled sample and its generator -----------------------------------------------------


def latex_fraction(value: Fraction) -> str:
    """``Fraction(1, 2)`` -> ``"\\frac{1}{2}"``; integers stay plain."""
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def sample_math_rows() -> list[dict[str, str]]:
    """The 50 rows of ``sample_math.jsonl``: arithmetic, fractions, linear equations,
    decimals, square roots and percentages, drawn from ``random.Random(2024)``, no repeats."""
    rng = random.Random(2024)
    rows: list[dict[str, str]] = []

    def fill(count, draw):
        target = len(rows) + count
        while len(rows) < target:
            question, answer = draw()
            if all(row["question"] != question for row in rows):
                rows.append({"id": f"sample-{len(rows)}", "question": question, "answer": answer})

    def arithmetic():
        a, b, op = rng.randint(2, 60), rng.randint(2, 40), rng.choice("+-*")
        return f"What is {a} {op} {b}?", str(OPS[op](a, b))

    def fraction_sum():
        a, b = Fraction(rng.randint(1, 3), rng.randint(4, 7)), Fraction(1, rng.randint(2, 6))
        return (f"What is {a} + {b}? Give the answer as a fraction in lowest terms.",
                latex_fraction(a + b))

    def simplify():
        den, factor = rng.randint(3, 9), rng.randint(2, 5)
        num = rng.randint(1, den - 1)
        return (f"Simplify \\frac{{{num * factor}}}{{{den * factor}}}.",
                latex_fraction(Fraction(num, den)))

    def equation():
        x, a, b = rng.randint(-5, 9), rng.randint(2, 7), rng.randint(1, 20)
        return f"Solve for x: {a}x + {b} = {a * x + b}.", f"x = {x}"

    def decimal():
        b = rng.choice([2, 4, 5, 8])
        a = rng.choice([n for n in range(1, 2 * b) if n % b])
        return f"Write {a}/{b} as a decimal.", str(a / b)

    def square_root():
        n = rng.randint(2, 20)
        return f"What is the square root of {n * n}?", str(n)

    def percentage():
        percent, n = rng.choice([10, 20, 25, 50]), rng.randint(1, 20) * 20
        return f"What is {percent}% of {n}?", str(percent * n // 100)

    for count, draw in [(12, arithmetic), (6, fraction_sum), (6, simplify), (10, equation),
                        (6, decimal), (5, square_root), (5, percentage)]:
        fill(count, draw)
    return rows


def write_sample(path: Path = SAMPLE) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in sample_math_rows()))


def test_sample_file_is_the_generator_output():
    expected = "".join(json.dumps(row) + "\n" for row in sample_math_rows())
    assert SAMPLE.read_text() == expected, "run python tests/unit/test_envs_dataset.py"
    assert sample_path().resolve() == SAMPLE.resolve()


def test_default_is_the_sample():
    env = DatasetEnv(subset="all")
    assert len(env) == 50 and env.spec.kwargs["path"] is None
    messages, info = env.reset(seed=0)
    assert messages == [{"role": "user", "content": sample_math_rows()[0]["question"]}]
    assert info == {"row": 0, "subset": "all", "answer": [sample_math_rows()[0]["answer"]]}


def test_oracle_solves_every_sample_row_with_math_verify():
    env = DatasetEnv(subset="all")
    for seed in range(len(env)):
        env.reset(seed=seed)
        gold = env.oracle_action()
        result = env.step(gold)
        assert result.reward == 1.0 and result.info["success"], gold
        assert result.info["checker"] == "math"
        assert env.oracle_action() is None


LATEX_GOLDS = ["\\sqrt{2}", "\\pi", "\\frac{\\pi}{2}", "2\\sqrt{3}", "\\{1,2\\}", "{1,2}",
               "\\frac{\\sqrt{3}}{2}", "(-\\infty, 3]"]


@pytest.mark.parametrize("checker", ["auto", "math"])
def test_oracle_and_bare_replies_win_on_latex_golds(tmp_path, checker):
    rows = [{"question": f"Q{i}?", "answer": gold} for i, gold in enumerate(LATEX_GOLDS)]
    path = write_jsonl(tmp_path / "latex.jsonl", rows)
    env = DatasetEnv(subset="all", path=str(path), checker=checker)
    for row, gold in enumerate(LATEX_GOLDS):
        assert math_equal(gold, gold), gold  # a bare reply equal to the gold matches it
        env.reset(seed=row)
        result = env.step(env.oracle_action())
        assert result.info == {"success": True, "checker": "math", "row": row}, gold
        assert play(env, row, gold).info["success"], gold
        assert play(env, row, f"The answer is $\\boxed{{{gold}}}$.").info["success"], gold


def test_bare_latex_replies_are_read_whole():
    assert not math_equal("2\\sqrt{3}", "2")  # not the leading 2 of the expression
    assert not math_equal("1 + 2x", "2")
    assert math_equal("1 + 2x", "2x + 1")
    assert math_equal("\\sqrt{2}", "2^{1/2}")


def test_oracle_boxes_a_gold_that_does_not_match_itself_bare(tmp_path):
    # forcing checker="math" on a word: the bare reply "Paris" has no math, the boxed one has
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "Capital?", "answer": "Paris"}])
    env = DatasetEnv(subset="all", path=str(path), checker="math")
    env.reset(seed=0)
    assert env.oracle_action() == "\\boxed{Paris}"
    assert env.step(env.oracle_action()).info["success"]


def test_gold_and_reply_parsing_is_shared_with_the_math_verify_reward():
    from turnrl.envs.builtin import dataset
    from turnrl.rewards.builtin import maths

    assert dataset.parse_gold is maths.parse_gold
    assert dataset.looks_like_math is maths.looks_like_math
    assert dataset.MATH_WORDS is maths.MATH_WORDS


@pytest.mark.parametrize("kwargs", [{}, {"checker": "exact"}, {"system_prompt": "Be brief."}])
def test_check_env_on_the_sample(kwargs):
    check_env(DatasetEnv(subset="all", **kwargs), seeds=range(5))


def test_make_builds_it_once_registered(monkeypatch):
    specs = dict(env_registry._SPECS)
    specs.setdefault(SPEC.id, SPEC)
    monkeypatch.setattr(env_registry, "_SPECS", specs)
    env = make("dataset-v0", checker="exact", subset="all")
    assert isinstance(env, DatasetEnv) and env.spec.id == "dataset-v0"
    assert env.spec.kwargs == {"path": None, "question_key": "question", "answer_key": "answer",
                               "system_prompt": None, "split": None, "checker": "exact",
                               "subset": "all", "test_fraction": 0.2, "test_path": None}
    check_env(env, seeds=range(3))


# -- episodes ---------------------------------------------------------------------------------


def test_seed_picks_row_modulo_length():
    env = DatasetEnv(subset="all")
    first, info = env.reset(seed=7)
    again, info_again = env.reset(seed=7 + len(env))
    assert first == again and info == info_again
    assert info["row"] == 7
    env.reset()  # no seed: a random row, still a valid prompt
    assert env.oracle_action() is not None


def test_wrong_reply_ends_the_episode():
    env = DatasetEnv(subset="all")
    env.reset(seed=0)
    gold = env.oracle_action()
    result = env.step("no idea")
    assert result.reward == 0.0 and result.terminated and not result.truncated
    assert result.info == {"success": False, "checker": "math", "row": 0}
    assert result.observation == [{"role": "user", "content": f"Wrong, the answer is {gold}."}]
    with pytest.raises(RuntimeError, match="reset"):
        env.step(gold)


def test_system_prompt_comes_first():
    messages, _ = DatasetEnv(subset="all", system_prompt="Answer with a number.").reset(seed=1)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == "Answer with a number."


def test_sample_action_is_some_gold_answer():
    env = DatasetEnv(subset="all")
    env.reset(seed=0)
    golds = {row[1][0] for row in env.rows}
    assert {env.sample_action(random.Random(s)) for s in range(20)} <= golds


# -- checkers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gold, reply, expected",
    [
        ("\\frac{1}{2}", "0.5", True),
        ("0.5", "\\frac{1}{2}", True),
        ("\\frac{1}{2}", "1/2", True),
        ("\\frac{1}{2}", "$\\frac{2}{4}$", True),
        ("x = 3", "3", True),
        ("3", "x = 3", True),
        ("x = 3", "x=3", True),
        ("x = 3", "y = 3", False),  # a bare equation is read whole: the variable differs
        ("3", "y = 3", True),  # an equation against a number: its right-hand side counts
        ("x = 3", "x = 4", False),
        ("12", "The answer is \\boxed{12}.", True),
        ("12", "12.0", True),
        ("1000", "1,000", True),
        ("-16", "-16", True),
        ("\\sqrt{2}", "$2^{1/2}$", True),
        ("\\frac{1}{2}", "I think 0.5, so the final answer is 3", False),  # the last answer
        ("12", "13", False),
        ("12", "", False),
    ],
)
def test_math_verify_equivalences(gold, reply, expected):
    assert math_equal(reply, gold) is expected


def test_math_checking_works_off_the_main_thread():
    results = []
    thread = threading.Thread(target=lambda: results.append(math_equal("0.5", "\\frac{1}{2}")))
    thread.start()
    thread.join()
    assert results == [True]


@pytest.mark.parametrize(
    "text, normalized",
    [
        ("The Eiffel Tower.", "eiffel tower"),
        ("  An  apple!  ", "apple"),
        ("New\tYork", "new york"),
        ("rock'n'roll", "rocknroll"),
    ],
)
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


def test_exact_match():
    assert exact_equal("the eiffel tower", "Eiffel Tower!")
    assert exact_equal("PARIS", "Paris")
    assert not exact_equal("Paris, France", "Paris")
    assert not exact_equal("London", "Paris")


@pytest.mark.parametrize(
    "gold, is_math",
    [("12", True), ("-3.5", True), ("x = 3", True), ("\\frac{1}{2}", True), ("\\pi", True),
     ("\\sqrt{2}", True), ("2x + 1", True), ("Paris", False), ("12 apples", False),
     ("A", False), ("yes", False), ("Paris 1889", False)],
)
def test_auto_checker_choice(gold, is_math):
    assert looks_like_math(gold) is is_math


def test_auto_uses_exact_for_text_answers(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", [
        {"question": "Capital of France?", "answer": "Paris"},
        {"question": "Tallest tower in Paris?", "answer": ["Eiffel Tower", "la tour Eiffel"]},
        {"question": "2+2?", "answer": 4},
    ])
    env = DatasetEnv(subset="all", path=str(path))
    assert play(env, 0, "paris.").info == {"success": True, "checker": "exact", "row": 0}
    assert play(env, 1, "La Tour Eiffel").info["success"]  # any gold answer counts
    assert env.reset(seed=1) and env.oracle_action() == "Eiffel Tower"
    assert play(env, 2, "4.0").info == {"success": True, "checker": "math", "row": 2}


def test_exact_checker_rejects_equivalent_math():
    env = DatasetEnv(subset="all", checker="exact")
    row, gold = next((i, golds[0]) for i, (_, golds) in enumerate(env.rows)
                     if golds[0].startswith("x = "))
    assert play(env, row, f" {gold.upper()}.").info["success"]  # case, punctuation, spaces
    assert not play(env, row, gold.removeprefix("x = ")).info["success"]


def test_math_checker_requires_a_parsable_gold(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "Grade?", "answer": "???"}])
    env = DatasetEnv(subset="all", path=str(path), checker="math")
    with pytest.raises(DatasetEnvError, match=r"row 0.*cannot parse.*'\?\?\?'.*checker='auto'"):
        env.reset(seed=0)


def test_math_checker_reads_words_as_symbols(tmp_path):
    """A quirk of forcing checker="math" on text: math-verify parses a LaTeX "Paris" as the
    product p*a*r*i*s, and a plain-text reply "Paris" as nothing, so it never matches."""
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "Capital?", "answer": "Paris"}])
    math = DatasetEnv(subset="all", path=str(path), checker="math")
    assert not play(math, 0, "Paris").info["success"]
    assert play(DatasetEnv(subset="all", path=str(path)), 0, "Paris").info["checker"] == "exact"


# -- loading formats --------------------------------------------------------------------------

ROWS = [{"problem": "1+1?", "solution": "2", "level": 1},
        {"problem": "Half of one?", "solution": "\\frac{1}{2}", "level": 2}]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def play(env: DatasetEnv, seed: int, reply: str):
    env.reset(seed=seed)
    return env.step(reply)


def assert_loaded(path: Path, **kwargs) -> DatasetEnv:
    env = DatasetEnv(subset="all", path=str(path), question_key="problem",
                     answer_key="solution", **kwargs)
    assert env.rows == [("1+1?", ("2",)), ("Half of one?", ("\\frac{1}{2}",))]
    assert play(env, 1, "0.5").reward == 1.0
    check_env(env, seeds=range(2))
    return env


def test_load_jsonl(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n" + json.dumps(ROWS[1]) + "\n")  # blank line ok
    assert_loaded(path)


def test_load_json_array(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(json.dumps(ROWS))
    assert_loaded(path)


def test_load_csv_and_tsv(tmp_path):
    csv_path = tmp_path / "d.csv"
    csv_path.write_text("problem,solution,level\n1+1?,2,1\nHalf of one?,\\frac{1}{2},2\n")
    assert_loaded(csv_path)
    tsv_path = tmp_path / "d.tsv"
    tsv_path.write_text("problem\tsolution\n1+1?\t2\nHalf of one?\t\\frac{1}{2}\n")
    assert_loaded(tsv_path)


def test_load_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), path)
    assert_loaded(path)


def test_load_saved_dataset_and_dataset_dict(tmp_path):
    datasets = pytest.importorskip("datasets")
    single = tmp_path / "single"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(single))
    assert_loaded(single)
    splits = tmp_path / "splits"
    datasets.DatasetDict({
        "train": datasets.Dataset.from_list(ROWS),
        "test": datasets.Dataset.from_list(ROWS[:1]),
    }).save_to_disk(str(splits))
    assert_loaded(splits)  # defaults to "train"
    test = DatasetEnv(subset="all", path=str(splits), split="test", question_key="problem",
                      answer_key="solution")
    assert len(test) == 1 and test.spec.kwargs["split"] == "test"
    with pytest.raises(DatasetEnvError, match=r"no split 'dev'; splits: test, train"):
        DatasetEnv(subset="all", path=str(splits), split="dev", question_key="problem",
                   answer_key="solution")
    with pytest.raises(DatasetEnvError, match=r"single Dataset.*drop split='test'"):
        DatasetEnv(subset="all", path=str(single), split="test", question_key="problem",
                   answer_key="solution")


# -- errors -----------------------------------------------------------------------------------


def test_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(DatasetEnvError, match=rf"{missing.name}' does not exist"):
        DatasetEnv(subset="all", path=str(missing))


def test_missing_column_lists_the_columns(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    with pytest.raises(DatasetEnvError) as caught:
        DatasetEnv(subset="all", path=str(path))
    message = str(caught.value)
    assert "column 'question' not found" in message and "d.jsonl" in message
    assert "columns present: problem, solution, level" in message
    assert "question_key=" in message
    with pytest.raises(DatasetEnvError, match=r"column 'answer'.*answer_key="):
        DatasetEnv(subset="all", path=str(path), question_key="problem")


def test_empty_dataset(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(DatasetEnvError, match=r"empty.jsonl has no rows"):
        DatasetEnv(subset="all", path=str(empty))
    header_only = tmp_path / "empty.csv"
    header_only.write_text("question,answer\n")
    with pytest.raises(DatasetEnvError, match=r"empty.csv has no rows"):
        DatasetEnv(subset="all", path=str(header_only))


def test_bad_json_line_is_located(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(DatasetEnvError, match=r"d.jsonl line 2 is not valid JSON"):
        DatasetEnv(subset="all", path=str(path))
    path.write_text("[1, 2]\n")
    with pytest.raises(DatasetEnvError, match=r"item 0 must be a JSON object"):
        DatasetEnv(subset="all", path=str(tmp_path / "d.jsonl"))


def test_missing_value_is_located(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "q", "answer": "1"},
                                              {"question": "q2", "answer": None}])
    with pytest.raises(DatasetEnvError, match=r"d.jsonl line 2: 'answer' must be a non-empty"):
        DatasetEnv(subset="all", path=str(path))
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "", "answer": "1"}])
    with pytest.raises(DatasetEnvError, match=r"line 1: empty 'question'"):
        DatasetEnv(subset="all", path=str(path))


def test_unreadable_files(tmp_path):
    pytest.importorskip("pyarrow")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"definitely not parquet")
    with pytest.raises(DatasetEnvError, match=r"cannot read .*bad.parquet as Parquet"):
        DatasetEnv(subset="all", path=str(bad))
    binary = tmp_path / "bad.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DatasetEnvError, match=r"cannot read .*bad.jsonl"):
        DatasetEnv(subset="all", path=str(binary))
    unknown = tmp_path / "data.txt"
    unknown.write_text("hello")
    with pytest.raises(DatasetEnvError, match=r"unsupported file type '.txt'; use .jsonl"):
        DatasetEnv(subset="all", path=str(unknown))


def test_directory_that_is_not_a_dataset(tmp_path):
    pytest.importorskip("datasets")
    with pytest.raises(DatasetEnvError, match=r"cannot load .* with datasets.load_from_disk"):
        DatasetEnv(subset="all", path=str(tmp_path))


def test_split_on_a_single_file(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"question": "q", "answer": "1"}])
    with pytest.raises(DatasetEnvError, match=r"split='test'.*single file"):
        DatasetEnv(subset="all", path=str(path), split="test")


def test_bad_checker_and_options():
    with pytest.raises(ValueError, match=r"checker='fuzzy' is not one of \('auto', 'math'"):
        DatasetEnv(subset="all", checker="fuzzy")
    with pytest.raises(ValueError, match="no options"):
        DatasetEnv(subset="all").reset(seed=0, options={"row": 1})


def test_errors_are_value_errors():
    """So ``train.loop.check_env_kwargs`` reports them as config errors, not tracebacks."""
    assert issubclass(DatasetEnvError, ValueError)


if __name__ == "__main__":  # regenerate the bundled sample
    write_sample()
    sys.stdout.write(f"wrote {SAMPLE}\n")


def test_reset_info_carries_the_gold_answers_for_reward_functions() -> None:
    from turnrl.envs import make
    from turnrl.rewards import exact_match
    from turnrl.types import Trajectory

    env = make("dataset-v0", subset="all")
    messages, info = env.reset(seed=3)
    gold = env.oracle_action()
    assert info["answer"][0] == gold
    episode = Trajectory(env_id="dataset-v0", seed=3, group_id=0,
                         messages=[*messages, {"role": "assistant", "content": gold}],
                         info={"answer": info["answer"]})
    assert exact_match(episode) == 1.0


# -- the held-out split and what reward functions see ----------------------------------------


def test_training_and_evaluation_play_disjoint_rows():
    """Training plays the train rows; held-out evaluation (the spec's eval_kwargs, applied by
    the run) the test rows: every 5th row or so (test_fraction 0.2), spread over the file."""
    train, test = DatasetEnv(), DatasetEnv(**SPEC.eval_kwargs)
    assert (len(train), len(test)) == (40, 10)
    assert not {q for q, _ in train.rows} & {q for q, _ in test.rows}
    assert {q for q, _ in train.rows} | {q for q, _ in test.rows} == {
        r["question"] for r in sample_math_rows()}
    # seeds cycle within the subset: a seed past the train rows never reaches a test row
    questions = {train.reset(seed=s)[0][-1]["content"] for s in range(1_000_000_000, 1_000_000_100)}
    assert questions <= {q for q, _ in train.rows}


def test_a_test_file_and_a_dataset_too_small_to_split(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"question": f"q{i}", "answer": str(i)}
                                           for i in range(3)])
    write_jsonl(tmp_path / "test.jsonl", [{"question": "t", "answer": "9"}])
    both = dict(path=str(tmp_path / "train.jsonl"), test_path=str(tmp_path / "test.jsonl"))
    assert len(DatasetEnv(**both)) == 3 and len(DatasetEnv(**both, subset="test")) == 1
    assert len(DatasetEnv(path=str(tmp_path / "train.jsonl"))) == 2  # one row held out
    write_jsonl(tmp_path / "one.jsonl", [{"question": "q", "answer": "1"}])
    with pytest.warns(UserWarning, match=r"has one row: training and held-out evaluation "
                                         "both play it"):
        one = DatasetEnv(path=str(tmp_path / "one.jsonl"))
        held_out = DatasetEnv(path=str(tmp_path / "one.jsonl"), subset="test")
    assert one.rows == held_out.rows == [("q", ("1",))]
    assert len(DatasetEnv(path=str(tmp_path / "one.jsonl"), subset="all")) == 1


def test_a_file_is_read_once_while_unchanged_and_again_once_it_changes(tmp_path, monkeypatch):
    """SFT and rollouts make an env per episode: the file must not be parsed each time."""
    from turnrl.envs.builtin import dataset

    reads = []
    real_read = dataset._read
    monkeypatch.setattr(dataset, "_read", lambda *a: reads.append(a[0]) or real_read(*a))
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": f"q{i}", "answer": str(i)}
                                               for i in range(10)])
    envs = [DatasetEnv(path=str(path), subset=s) for s in ("train", "test", "all", "train")]
    assert reads == [path]
    assert [len(e) for e in envs] == [8, 2, 10, 8]
    write_jsonl(path, [{"question": f"new {i}", "answer": str(i)} for i in range(20)])
    env = DatasetEnv(path=str(path), subset="all")
    assert reads == [path, path] and env.rows[0] == ("new 0", ("0",))
    assert envs[2].rows[0] == ("q0", ("0",))  # an env made before keeps its rows


def test_messages_name_the_file_and_row_a_held_out_row_is_from(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"question": "q", "answer": "1"}] * 3)
    write_jsonl(tmp_path / "test.jsonl", [{"question": "ok", "answer": "2"},
                                          {"question": "Grade?", "answer": "???"}])
    env = DatasetEnv(path=str(tmp_path / "train.jsonl"), test_path=str(tmp_path / "test.jsonl"),
                     subset="test", checker="math")
    assert env.origin(1) == f"{tmp_path / 'test.jsonl'} row 1"
    with pytest.raises(DatasetEnvError, match=r"test\.jsonl row 1: math-verify cannot parse"):
        env.reset(seed=1)
    spread = DatasetEnv(path=str(tmp_path / "test.jsonl"), test_fraction=0.5, subset="test")
    assert spread.origin(0) == f"{tmp_path / 'test.jsonl'} row 1"  # row ⌊(0 + ½) · 2 / 1⌋


def test_reward_functions_see_the_golds_as_a_list_of_strings(tmp_path):
    """The contract: reset info's ``answer`` is every accepted gold, as strings, canonical
    first (a number in the data is its text), as search-qa-v0 gives it."""
    write_jsonl(tmp_path / "n.jsonl", [{"question": "2+3?", "answer": 5},
                                       {"question": "pick", "answer": ["four", 4]}])
    env = DatasetEnv(path=str(tmp_path / "n.jsonl"), subset="all")
    assert env.reset(seed=0)[1]["answer"] == ["5"]
    assert env.reset(seed=1)[1]["answer"] == ["four", "4"]


def test_sft_demonstrations_of_the_dataset_are_all_correct():
    """A random reply to a one-turn question visits no other state; it would only teach a
    wrong answer, so dataset-v0's spec turns them off (sft.random_action_prob notwithstanding)."""
    from turnrl.train.sft import play_demonstrations

    demos = play_demonstrations(DatasetEnv, range(40), random_action_prob=0.5)
    assert len(demos.conversations) == 40
    golds = {q: golds for q, golds in DatasetEnv().rows}
    for conversation in demos.conversations:
        question, reply = conversation[-3]["content"], conversation[-2]
        assert reply.get("weight", 1) == 1 and reply["content"] in golds[question]
        assert conversation[-1]["content"] == "Correct."
