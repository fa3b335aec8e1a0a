"""Corpus and question data of ``search-qa-v0``: the data types and the JSONL file loaders.

Owns :class:`Passage`, :class:`Corpus` (with its content fingerprint), :class:`Hop`,
:class:`Question`, :class:`KnowledgeBaseError`, and :func:`load_corpus` /
:func:`load_questions`, which read your own JSONL files (cached per file) and whose errors name
the file, the line and the missing key. The generated fictional world lives in
:mod:`turnrl.envs.builtin.kb_world`; :mod:`turnrl.envs.builtin.kb` is the public home of both.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENV_ID = "search-qa-v0"  # the prefix of every user-facing error


class KnowledgeBaseError(ValueError):
    """A corpus or question file that cannot be used; the message names file, line and fix."""


# --------------------------------------------------------------------------- data types


@dataclass(frozen=True)
class Passage:
    """One retrievable unit: ``id`` is unique in its corpus; ``title`` may be empty."""

    id: str
    text: str
    title: str = ""

    def render(self) -> str:
        """The text as indexed and shown to the agent: ``"Title: text"`` or ``"text"``."""
        return f"{self.title}: {self.text}" if self.title else self.text


@dataclass(frozen=True)
class Corpus:
    """Passages in a fixed order, with a sha256 ``fingerprint`` of their ids, titles and texts."""

    passages: tuple[Passage, ...]
    fingerprint: str = field(init=False)
    index_of: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256()
        for passage in self.passages:
            for part in (passage.id, passage.title, passage.text):
                digest.update(part.encode("utf-8"))
                digest.update(b"\x00")
        object.__setattr__(self, "fingerprint", digest.hexdigest())
        object.__setattr__(self, "index_of", {p.id: i for i, p in enumerate(self.passages)})

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __len__(self) -> int:
        return len(self.passages)

    def __iter__(self) -> Iterator[Passage]:
        return iter(self.passages)

    def texts(self) -> list[str]:
        """What a retriever indexes: each passage's :meth:`Passage.render`."""
        return [passage.render() for passage in self.passages]


@dataclass(frozen=True)
class Hop:
    """One step of the reasoning chain: the passage(s) that hold the fact, and search queries
    (best first) that retrieve them. Empty ``support`` (user questions without support ids)
    means one search for ``queries[0]`` completes the hop."""

    support: tuple[str, ...]
    queries: tuple[str, ...]


@dataclass(frozen=True)
class Question:
    """A question, its acceptable answers (canonical first) and the hops that answer it."""

    text: str
    answers: tuple[str, ...]
    hops: tuple[Hop, ...]
    kind: str  # e.g. "birth_city", "employer_founded", "user"

    @property
    def support(self) -> tuple[str, ...]:
        """Every supporting passage id, in hop order."""
        return tuple(pid for hop in self.hops for pid in hop.support)


# --------------------------------------------------------------------------- user files

CORPUS_LINE = '{"id": "doc1", "text": "...", "title": "..." (optional)}'
QUESTION_LINE = '{"question": "...", "answer": "..."} (or "answers": ["...", ...])'


def _jsonl(path: Path, what: str, example: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of a JSONL file."""
    if not path.is_file():
        problem = "is a directory" if path.is_dir() else "does not exist"
        raise KnowledgeBaseError(
            f"{ENV_ID}: {what} {str(path)!r} {problem}; pass the path of a JSONL file with one "
            f"object per line like {example}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeBaseError(f"{ENV_ID}: cannot read {what} {path}: {exc}") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise KnowledgeBaseError(
                f"{ENV_ID}: {path} line {number} is not valid JSON ({exc.msg} at column "
                f"{exc.colno}); each line must be one JSON object like {example}") from None
        if not isinstance(obj, dict):
            raise KnowledgeBaseError(
                f"{ENV_ID}: {path} line {number} is a JSON {type(obj).__name__}, not an "
                f"object; each line must be one JSON object like {example}")
        yield number, obj


def _text_field(obj: dict[str, Any], key: str, where: str, example: str, *,
                required: bool = True) -> str:
    if key not in obj:
        if not required:
            return ""
        raise KnowledgeBaseError(
            f"{ENV_ID}: {where} has no {key!r} key (keys: {', '.join(map(repr, obj)) or 'none'})"
            f"; each line needs it, like {example}")
    value = obj[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or (required and not value.strip()):
        raise KnowledgeBaseError(
            f"{ENV_ID}: {where}: {key!r} must be a non-empty string, got {value!r}")
    return value.strip()


def _stat_key(path: str | Path) -> tuple[str, int, int]:
    resolved = Path(path).expanduser().resolve()
    try:
        stat = resolved.stat()
    except OSError:
        return str(resolved), -1, -1
    return str(resolved), stat.st_mtime_ns, stat.st_size


def load_corpus(path: str | Path) -> Corpus:
    """Read a JSONL corpus: one ``{"id", "text", "title"?}`` object per line; ids unique.

    Cached per file (path, modification time and size), so envs made per episode share it.
    """
    return _load_corpus(_stat_key(path))


@functools.lru_cache(maxsize=8)
def _load_corpus(key: tuple[str, int, int]) -> Corpus:
    path = Path(key[0])
    passages: list[Passage] = []
    first_line: dict[str, int] = {}
    for number, obj in _jsonl(path, "corpus_path", CORPUS_LINE):
        where = f"{path} line {number}"
        doc_id = _text_field(obj, "id", where, CORPUS_LINE)
        if doc_id in first_line:
            raise KnowledgeBaseError(
                f"{ENV_ID}: {where}: duplicate id {doc_id!r} (first on line "
                f"{first_line[doc_id]}); give every document a unique id")
        first_line[doc_id] = number
        text = _text_field(obj, "text", where, CORPUS_LINE)
        title = _text_field(obj, "title", where, CORPUS_LINE, required=False)
        passages.append(Passage(doc_id, text, title))
    if not passages:
        raise KnowledgeBaseError(f"{ENV_ID}: corpus {path} has no documents; add lines like "
                                 f"{CORPUS_LINE}")
    return Corpus(tuple(passages))


def load_questions(path: str | Path, corpus: Corpus) -> tuple[Question, ...]:
    """Read a JSONL question file: ``{"question", "answer" | "answers", "support"?}`` per line.

    ``answers`` is a list of acceptable answers (any counts as correct); ``support``, optional,
    lists the ids of the corpus documents that answer the question (for ``privileged_info()``
    and the oracle). Cached per file and corpus.
    """
    return _load_questions(_stat_key(path), corpus)


@functools.lru_cache(maxsize=8)
def _load_questions(key: tuple[str, int, int], corpus: Corpus) -> tuple[Question, ...]:
    path = Path(key[0])
    questions = []
    for number, obj in _jsonl(path, "questions_path", QUESTION_LINE):
        where = f"{path} line {number}"
        text = _text_field(obj, "question", where, QUESTION_LINE)
        answers = _answers(obj, where)
        support = obj.get("support", [])
        if isinstance(support, str):
            support = [support]
        if not isinstance(support, list) or not all(isinstance(s, str) for s in support):
            raise KnowledgeBaseError(
                f"{ENV_ID}: {where}: 'support' must be a list of document ids, got {support!r}")
        unknown = [s for s in support if s not in corpus.index_of]
        if unknown:
            raise KnowledgeBaseError(
                f"{ENV_ID}: {where}: support id(s) {', '.join(map(repr, unknown))} are not in "
                "the corpus; use the 'id' of corpus documents")
        questions.append(Question(text, answers, (Hop(tuple(support), (text,)),), "user"))
    if not questions:
        raise KnowledgeBaseError(f"{ENV_ID}: question file {path} has no questions; add lines "
                                 f"like {QUESTION_LINE}")
    return tuple(questions)


def _answers(obj: dict[str, Any], where: str) -> tuple[str, ...]:
    if "answers" in obj:
        key, raw = "answers", obj["answers"]
    elif "answer" in obj:
        key, raw = "answer", obj["answer"]
    else:
        raise KnowledgeBaseError(
            f"{ENV_ID}: {where} has no 'answer' key (nor 'answers'; keys: "
            f"{', '.join(map(repr, obj)) or 'none'}); each line needs one, like {QUESTION_LINE}")
    items = raw if isinstance(raw, list) else [raw]
    answers = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)) or not str(
                item).strip():
            raise KnowledgeBaseError(
                f"{ENV_ID}: {where}: {key!r} must be a non-empty string or number, or a "
                f"non-empty list of them, got {raw!r}")
        answers.append(str(item).strip())
    if not answers:
        raise KnowledgeBaseError(f"{ENV_ID}: {where}: {key!r} is an empty list; give at "
                                 "least one acceptable answer")
    return tuple(answers)
