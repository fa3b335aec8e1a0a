"""``dataset-v0``: one question from a local dataset, answered in one turn and checked.

Tests whether the agent answers a verifiable question (math, short-answer QA) from your own
data: a JSONL (or JSON array) file, a CSV/TSV file, a Parquet file, or a directory saved
with Hugging Face ``datasets``' ``save_to_disk``. Without ``path`` it plays the bundled
``data/sample_math.jsonl`` (50 generated arithmetic and algebra questions)::

    user:      Solve for x: 3x + 4 = 13.
    assistant: x = 3
    user:      Correct.                     reward 1.0, terminated

``subset`` chooses the rows: ``"train"`` (default), ``"test"`` (held out: ``test_path``'s
rows, else ``round(n · test_fraction)`` rows spread evenly over the file; a one-row file is
both, with a warning) or ``"all"``; the
spec's ``eval_kwargs`` make a run's held-out evaluation play the test rows. ``reset(seed)``
plays row ``seed % len(rows)`` of the subset (seed ``s`` and ``s + len`` are the same task);
``reset()`` without a seed draws a row at random. The first message is ``system_prompt`` when
given, then the question (column ``question_key``) as the user. The reset info's ``answer``
is every accepted gold as a list of strings, canonical first, for reward functions.

The reply earns 1.0 when it matches the gold answer (column ``answer_key``; a list of strings
means any of them is right), else 0.0, and the episode terminates. ``checker`` decides how:

* ``"math"``: the reply (its last ``\\boxed{}``, LaTeX or plain expression; a bare expression
  such as ``2\\sqrt{3}`` as a whole) ``verify``-equal to the gold, parsed as LaTeX:
  ``"0.5"`` matches ``"\\frac{1}{2}"``, ``"3"`` and ``"x = 3"`` match each other, ``"1/2"``
  matches ``"0.5"``, ``"\\sqrt{2}"`` matches ``"\\sqrt{2}"``. Golds and replies are read by
  :mod:`turnrl.rewards.builtin.maths` (:func:`~turnrl.rewards.builtin.maths.parse_gold`,
  :func:`~turnrl.rewards.builtin.maths.parse_reply`), as the ``math_verify`` reward reads them.
* ``"exact"``: equal after normalising both (lowercase, punctuation and the articles a/an/the
  removed, whitespace collapsed): ``"The Eiffel Tower."`` matches ``"eiffel tower"``.
* ``"auto"`` (default): ``"math"`` for a gold that contains a digit or a LaTeX command, has no
  word of two or more letters other than math names (``sqrt``, ``pi``, ...) and parses as
  math; ``"exact"`` otherwise (``"Paris"``, ``"12 apples"``).

Outside the main thread math-verify runs without its signal-based timeout (it cannot use one).
"""

from __future__ import annotations

import csv
import functools
import importlib
import json
import random
import re
import string
import warnings
from collections.abc import Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

from turnrl.envs.protocol import EnvSpec
from turnrl.rewards.builtin import maths
from turnrl.rewards.builtin.maths import MATH_WORDS, looks_like_math, parse_gold, parses_as_math
from turnrl.types import Message, StepResult

__all__ = [
    "CHECKERS",
    "MATH_WORDS",
    "SPEC",
    "DatasetEnv",
    "DatasetEnvError",
    "exact_equal",
    "import_math_verify",
    "load_rows",
    "looks_like_math",
    "math_equal",
    "normalize_answer",
    "parse_gold",
    "parses_as_math",
    "read_records",
    "sample_path",
]

SPEC = EnvSpec(
    id="dataset-v0",
    entry_point="turnrl.envs.builtin.dataset:DatasetEnv",
    max_turns=1,
    description="One question from a local dataset (JSONL, CSV, Parquet, datasets dir); the "
    "reply is checked against the gold answer (math-verify or normalised exact match).",
    reward_range=(0.0, 1.0),
    has_oracle=True,
    eval_kwargs={"subset": "test"},  # held-out evaluation plays the held-out rows
    demo_random_actions=False,  # one turn: a random reply is only a wrong answer to learn
)
SUBSETS = ("train", "test", "all")

CHECKERS = ("auto", "math", "exact")
SAMPLE_FILE = "data/sample_math.jsonl"  # inside the turnrl.envs.builtin package
FILE_TYPES = {".jsonl": "json", ".ndjson": "json", ".json": "json", ".csv": "csv",
              ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet"}
MATH_TIMEOUT_S = maths.MATH_TIMEOUT_S  # per parse and comparison (main thread only)

Record = tuple[str, dict[str, Any]]  # (where: "line 3" / "row 3", the row)


class DatasetEnvError(ValueError):
    """A dataset that cannot be used; the message names the file, the row and the fix."""


class DatasetEnv:
    """Single-turn questions from a local dataset, checked against the gold answer."""

    def __init__(
        self,
        *,
        path: str | None = None,
        question_key: str = "question",
        answer_key: str = "answer",
        system_prompt: str | None = None,
        split: str | None = None,
        checker: str = "auto",
        subset: str = "train",
        test_fraction: float = 0.2,
        test_path: str | None = None,
    ) -> None:
        if checker not in CHECKERS:
            raise ValueError(f"dataset-v0: checker={checker!r} is not one of {CHECKERS}")
        if subset not in SUBSETS:
            raise ValueError(f"dataset-v0: subset={subset!r} is not one of {SUBSETS}")
        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"dataset-v0: test_fraction={test_fraction!r} must be between 0 "
                             "and 1 (exclusive); use test_path for a held-out file")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(f"dataset-v0: system_prompt must be a str, got {system_prompt!r}")
        source = sample_path() if path is None else Path(path).expanduser()
        rows = load_rows(source, question_key, answer_key, split)  # (question, golds)
        # where rows are from, for messages: rows[i] is row i of source, then of test_path
        self._files = [(source, len(rows))]
        if test_path is not None:  # the held-out rows are a file of their own
            other = Path(test_path).expanduser()
            held_out = load_rows(other, question_key, answer_key, None)
            parts: dict[str, Sequence[int]] = {
                "train": range(len(rows)), "all": range(len(rows) + len(held_out)),
                "test": range(len(rows), len(rows) + len(held_out))}
            self._files.append((other, len(held_out)))
            rows = rows + held_out
        else:  # k = round(n · test_fraction) rows (at least 1), spread evenly over the file
            train, test, every = _held_out_split(len(rows), test_fraction)
            parts = {"train": train, "test": test, "all": every}
            if len(rows) < 2:  # nothing to hold out: both play it (e.g. `turnrl play`)
                parts["train"] = parts["test"] = parts["all"]
                if subset != "all":
                    warnings.warn(f"dataset-v0: {source} has one row: training and held-out "
                                  "evaluation both play it; add rows or give test rows as "
                                  "test_path", stacklevel=2)
        self.rows = [rows[i] for i in parts[subset]]
        self._index = parts[subset]  # row r of this subset is rows[self._index[r]]
        self.path, self.question_key, self.answer_key = path, question_key, answer_key
        self.system_prompt, self.split, self.checker = system_prompt, split, checker
        self.subset = subset
        if checker == "math":
            import_math_verify()
        self.spec = replace(SPEC, kwargs={
            "path": path,
            "question_key": question_key,
            "answer_key": answer_key,
            "system_prompt": system_prompt,
            "split": split,
            "checker": checker,
            "subset": subset,
            "test_fraction": test_fraction,
            "test_path": test_path,
        })
        self._rng: random.Random | None = None
        self._row: int | None = None  # the row being answered; None once answered
        self._checkers: dict[int, str] = {}  # row -> "math" | "exact", decided on first use

    def __len__(self) -> int:
        return len(self.rows)

    def origin(self, row: int) -> str:
        """Where row ``row`` of this subset is from: ``"<file> row <i>"``."""
        i = self._index[row]
        for file, n in self._files:
            if i < n:
                return f"{file} row {i}"
            i -= n
        raise IndexError(row)

    # -- the Env protocol -------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        """Row ``seed % len(self)``; a random row when ``seed`` is None."""
        if options:
            raise ValueError(f"dataset-v0: reset takes no options, got {sorted(options)}")
        if seed is not None or self._rng is None:
            self._rng = random.Random(seed)
        row = seed % len(self.rows) if seed is not None else self._rng.randrange(len(self.rows))
        self._row = row
        self._checker_of(row)  # a gold that checker="math" cannot parse fails here
        messages: list[Message] = []
        if self.system_prompt is not None:
            messages.append({"role": "system", "content": self.system_prompt})
        messages.append({"role": "user", "content": self.rows[row][0]})
        # the gold answers (a list of strings, canonical first) for reward functions
        # (turnrl.rewards: exact_match, math_verify, ...); the agent never sees info
        return messages, {"row": row, "subset": self.subset,
                          "answer": [str(gold) for gold in self.rows[row][1]]}

    def step(self, action: str) -> StepResult:
        if self._row is None:
            raise RuntimeError("dataset-v0: call reset() before step() (the episode is over)")
        row, self._row = self._row, None
        answers = self.rows[row][1]
        checker = self._checker_of(row)
        if checker == "math":
            success = any(math_equal(action, gold) for gold in answers)
        else:
            success = any(exact_equal(action, gold) for gold in answers)
        text = "Correct." if success else f"Wrong, the answer is {answers[0]}."
        return StepResult(
            observation=[{"role": "user", "content": text}],
            reward=1.0 if success else 0.0,
            terminated=True,
            truncated=False,
            info={"success": success, "checker": checker, "row": row},
        )

    def close(self) -> None:
        pass

    # -- optional capabilities --------------------------------------------------------------

    def oracle_action(self) -> str | None:
        """The first gold answer, as it is; for the math checker it is boxed
        (``\\boxed{gold}``) when that is needed for it to match itself."""
        if self._row is None:
            return None
        gold = self.rows[self._row][1][0]
        if self._checker_of(self._row) == "math" and not math_equal(gold, gold):
            boxed = f"\\boxed{{{gold}}}"
            if math_equal(boxed, gold):
                return boxed
        return gold

    def sample_action(self, rng: random.Random) -> str:
        """The gold answer of a random row, from the caller's ``rng`` (mostly wrong)."""
        return rng.choice(self.rows)[1][0]

    # -- helpers ----------------------------------------------------------------------------

    def _checker_of(self, row: int) -> str:
        if row not in self._checkers:
            answers = self.rows[row][1]
            if self.checker == "math":
                if not all(map(parses_as_math, answers)):
                    raise DatasetEnvError(
                        f"dataset-v0: {self.origin(row)}: math-verify cannot parse the "
                        f"gold answer {answers!r}; use checker='auto' or 'exact', or fix it"
                    )
                self._checkers[row] = "math"
            elif self.checker == "exact":
                self._checkers[row] = "exact"
            else:
                self._checkers[row] = "math" if all(map(looks_like_math, answers)) else "exact"
        return self._checkers[row]


# -- checking replies ---------------------------------------------------------------------------


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and the articles a/an/the, collapse whitespace (SQuAD)."""
    text = "".join(ch for ch in text.lower() if ch not in string.punctuation)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_equal(reply: str, gold: str) -> bool:
    """``normalize_answer(reply) == normalize_answer(gold)``."""
    return normalize_answer(reply) == normalize_answer(gold)


def math_equal(reply: str, gold: str) -> bool:
    """math-verify: does the answer in ``reply`` equal the gold expression? (The shared
    :func:`turnrl.rewards.builtin.maths.math_equal`, with this env's timeout.)"""
    return maths.math_equal(reply, gold, timeout_seconds=MATH_TIMEOUT_S)


def import_math_verify() -> Any:
    """``math_verify``, or an ImportError saying how to install it."""
    return maths.import_math_verify("dataset-v0: checking math answers",
                                    "or use checker='exact'")


# -- loading ------------------------------------------------------------------------------------


def sample_path() -> Path:
    """The bundled sample dataset, ``turnrl/envs/builtin/data/sample_math.jsonl``."""
    return Path(str(resources.files("turnrl.envs.builtin").joinpath(SAMPLE_FILE)))


def load_rows(
    path: Path, question_key: str, answer_key: str, split: str | None = None
) -> list[tuple[str, tuple[str, ...]]]:
    """``(question, gold answers)`` of every row; ``DatasetEnvError`` naming what is wrong.

    A file is read once per process while it is unchanged (same size and modification
    time): SFT and rollouts make an env per episode, and re-reading a file of n rows for
    each of m episodes cost O(n·m) (66 ms an env at 8,100 rows)."""
    try:
        stat = path.stat()
    except OSError:
        stat = None  # _read names the problem
    if stat is None or path.is_dir():
        return _load_rows(path, question_key, answer_key, split)
    return list(_load_file_rows(str(path.resolve()), stat.st_mtime_ns, stat.st_size,
                                question_key, answer_key, split))


@functools.lru_cache(maxsize=8)
def _held_out_split(n: int, test_fraction: float
                   ) -> tuple[tuple[int, ...], tuple[int, ...], range]:
    """The (train, test, all) row indices of ``n`` rows: ``k = max(1, round(n ·
    test_fraction))`` test rows spread evenly over the file, row ``⌊(j + ½) · n / k⌋`` for
    ``j < k``, and the rest for training."""
    k = max(1, round(n * test_fraction))
    test = sorted({int((j + 0.5) * n / k) for j in range(k)})
    held = set(test)
    return tuple(i for i in range(n) if i not in held), tuple(test), range(n)


@functools.lru_cache(maxsize=8)
def _load_file_rows(path: str, mtime_ns: int, size: int, question_key: str, answer_key: str,
                    split: str | None) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """:func:`_load_rows` of one version of a file (the key holds its size and time)."""
    return tuple(_load_rows(Path(path), question_key, answer_key, split))


def _load_rows(
    path: Path, question_key: str, answer_key: str, split: str | None
) -> list[tuple[str, tuple[str, ...]]]:
    records, columns = _read(path, split)
    if not records:
        where = f"{path} (split {split!r})" if split else str(path)
        raise DatasetEnvError(f"dataset-v0: {where} has no rows; point path at a non-empty "
                              "dataset")
    for role, key in (("question_key", question_key), ("answer_key", answer_key)):
        if key not in columns:
            raise DatasetEnvError(
                f"dataset-v0: column {key!r} not found in {path}; columns present: "
                f"{', '.join(columns) or 'none'}; pass {role}='<one of them>'"
            )
    rows = []
    for where, record in records:
        question = record.get(question_key)
        if question is None or (isinstance(question, str) and not question.strip()):
            raise DatasetEnvError(f"dataset-v0: {path} {where}: empty {question_key!r}")
        answers = _answers(record.get(answer_key))
        if not answers:
            raise DatasetEnvError(
                f"dataset-v0: {path} {where}: {answer_key!r} must be a non-empty string, number "
                f"or list of them, got {record.get(answer_key)!r}"
            )
        rows.append((str(question), answers))
    return rows


def _answers(value: Any) -> tuple[str, ...]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if any(v is None or isinstance(v, (dict, list, tuple)) for v in values):
        return ()
    answers = tuple(str(v).strip() for v in values)
    return answers if all(answers) else ()


def read_records(path: Path, split: str | None = None) -> list[dict[str, Any]]:
    """Every row of a JSONL/JSON/CSV/Parquet file or a saved datasets dir, as a dict;
    ``DatasetEnvError`` naming what is wrong (agent tasks are read with it too)."""
    return [dict(record) for _, record in _read(path, split)[0]]


def _read(path: Path, split: str | None) -> tuple[list[Record], list[str]]:
    if not path.exists():
        raise DatasetEnvError(f"dataset-v0: dataset file {str(path)!r} does not exist; check path")
    if path.is_dir():
        return _read_saved_dataset(path, split)
    kind = FILE_TYPES.get(path.suffix.lower())
    if kind is None:
        raise DatasetEnvError(
            f"dataset-v0: cannot read {path}: unsupported file type {path.suffix or '(none)'!r}; "
            f"use {', '.join(FILE_TYPES)} or a directory saved with datasets' save_to_disk"
        )
    if split is not None:
        raise DatasetEnvError(
            f"dataset-v0: split={split!r} selects a split of a saved DatasetDict directory; "
            f"{path} is a single file, so drop split"
        )
    try:
        if kind == "json":
            records = _read_json(path)
        elif kind == "csv":
            records = _read_csv(path)
        else:
            records = _read_parquet(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetEnvError(f"dataset-v0: cannot read {path}: {exc}") from exc
    columns: dict[str, None] = {}
    for _, record in records:
        columns.update(dict.fromkeys(record))
    return records, list(columns)


def _read_json(path: Path) -> list[Record]:
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):  # a JSON array of objects
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetEnvError(f"dataset-v0: {path} is not valid JSON: {exc}") from exc
        lines = [(f"item {i}", item) for i, item in enumerate(data)]
    else:
        lines = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                lines.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DatasetEnvError(
                    f"dataset-v0: {path} line {number} is not valid JSON ({exc.msg}); each line "
                    "of a JSONL file must be one JSON object"
                ) from exc
    for where, item in lines:
        if not isinstance(item, dict):
            raise DatasetEnvError(f"dataset-v0: {path} {where} must be a JSON object with the "
                                  f"question and answer, got {type(item).__name__}")
    return lines


def _read_csv(path: Path) -> list[Record]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter)
        try:
            # line 1 is the header; DictReader.line_num is the line a row ends on
            return [(f"line {reader.line_num}", dict(row)) for row in reader]
        except csv.Error as exc:
            raise DatasetEnvError(f"dataset-v0: {path} line {reader.line_num}: {exc}") from exc


def _read_parquet(path: Path) -> list[Record]:
    try:
        parquet = importlib.import_module("pyarrow.parquet")
    except ImportError as exc:
        raise ImportError(f"dataset-v0: reading {path} needs pyarrow, which is not installed; "
                          "pip install pyarrow") from exc
    try:
        table = parquet.read_table(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends on a bad file
        raise DatasetEnvError(f"dataset-v0: cannot read {path} as Parquet: {exc}") from exc
    return [(f"row {i}", record) for i, record in enumerate(table.to_pylist())]


def _read_saved_dataset(path: Path, split: str | None) -> tuple[list[Record], list[str]]:
    try:
        datasets = importlib.import_module("datasets")
    except ImportError as exc:
        raise ImportError(f"dataset-v0: reading the saved dataset {path} needs the datasets "
                          "package, which is not installed; pip install datasets") from exc
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # FileNotFoundError, ValueError... on a dir that is no dataset
        raise DatasetEnvError(
            f"dataset-v0: cannot load {path} with datasets.load_from_disk ({exc}); point path "
            "at a directory written by Dataset.save_to_disk or at a JSONL/CSV/Parquet file"
        ) from exc
    if isinstance(loaded, datasets.DatasetDict):
        splits = sorted(loaded)
        if split is None:
            if "train" not in loaded and len(splits) != 1:
                raise DatasetEnvError(f"dataset-v0: {path} has splits {', '.join(splits)}; "
                                      "choose one with split=...")
            split = "train" if "train" in loaded else splits[0]
        if split not in loaded:
            raise DatasetEnvError(f"dataset-v0: {path} has no split {split!r}; splits: "
                                  f"{', '.join(splits)}")
        loaded = loaded[split]
    elif split is not None:
        raise DatasetEnvError(f"dataset-v0: {path} is a single Dataset, not a DatasetDict; "
                              f"drop split={split!r}")
    records = [(f"row {i}", record) for i, record in enumerate(loaded.to_list())]
    return records, list(loaded.column_names)
