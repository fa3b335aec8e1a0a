"""Knowledge bases for ``search-qa-v0``: a fictional world generated from a seed, or your files.

A :class:`Corpus` is an immutable list of :class:`Passage` objects (id, text, optional title)
with a content fingerprint, so a retrieval index can be cached per corpus. Questions are
:class:`Question` objects: the text, the acceptable answers, and the :class:`Hop` chain that
leads to the answer (for each hop the supporting passage and search queries that find it,
which is what the env's oracle and ``privileged_info()`` use).

``generate_kb(seed)`` builds a small world of fictional countries, cities, organisations and
people with names made of random syllables, so the facts cannot be memorised across seeds::

    Poushund Gastes was born in Prokeitoun in 1912.           (person bio)
    Poushund Gastes works for Pouprasel Studios as a pilot.   (person career)
    Pouprasel Studios was founded in 1926 by Shuthaith Paflesh. (organisation founding)
    Pouprasel Studios is headquartered in Dribatiash.         (organisation headquarters)
    Naishatrind is a city located in Geimendor.               (city)
    The capital of Thoudroia is Gukradoum.                    (country)

and asks single-hop questions ("In which city was Poushund Gastes born?") or two-hop ones
that chain two passages ("In which year was the employer of Poushund Gastes founded?").

``load_corpus(path)`` and ``load_questions(path, corpus)`` read your own JSONL files; their
errors name the file, the line and the missing key (:class:`KnowledgeBaseError`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Corpus",
    "Hop",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "Passage",
    "Question",
    "generate_kb",
    "load_corpus",
    "load_questions",
]

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


# --------------------------------------------------------------------------- the generator

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "br", "dr", "kr", "tr", "st", "sh", "th", "gl", "pr", "fl")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou", "ia")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "th", "k", "nd", "sh")
_ORG_KINDS = ("Labs", "Group", "Institute", "Foundry", "Press", "Bank", "Guild", "Company",
              "Studios", "Trust", "Systems", "Collective")
_JOBS = ("engineer", "archivist", "pilot", "chemist", "teacher", "designer", "surveyor",
         "translator", "economist", "architect", "botanist", "journalist", "cartographer",
         "physician", "librarian", "geologist")
# Words of the passage templates, the questions and the oracle's queries: a generated name
# must not be one of them (it would blur what BM25 matches).
_RESERVED = frozenset((
    "born", "works", "for", "as", "founded", "by", "headquartered", "city", "located", "capital",
    "country", "the", "of", "in", "is", "was", "which", "what", "who", "year", "does", "work",
    "organisation", "occupation", "employer", "founder", "where", "an", "and",
))

Sizes = tuple[int, int, int, int]  # countries, cities, organisations, people


@dataclass(frozen=True)
class _Person:
    index: int
    first: str
    last: str
    birth_year: int
    birth_city: int
    employer: int
    job: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


@dataclass(frozen=True)
class _Org:
    index: int
    word: str
    kind: str
    founded: int
    founder: int
    city: int

    @property
    def name(self) -> str:
        return f"{self.word} {self.kind}"


@dataclass(frozen=True)
class _City:
    index: int
    name: str
    country: int


@dataclass(frozen=True)
class _Country:
    index: int
    name: str
    capital: int


class _Names:
    """Unique syllable words (compared case-insensitively), drawn from one ``rng``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set(_RESERVED)

    def word(self, syllables: tuple[int, int] = (2, 3), suffix: str = "") -> str:
        for _ in range(10_000):
            count = self.rng.randint(*syllables)
            parts = [self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) for _ in range(count)]
            word = ("".join(parts) + self.rng.choice(_CODAS) + suffix).capitalize()
            if len(word) >= 4 and word.lower() not in self.used:
                self.used.add(word.lower())
                return word
        raise RuntimeError("kb: ran out of fresh syllable names")  # not reachable at our sizes


def _sizes(num_people: int) -> Sizes:
    return max(2, num_people // 16), max(4, num_people // 4), max(4, num_people // 4), num_people


class KnowledgeBase:
    """A generated fictional world: its passages (:attr:`corpus`) and a question sampler.

    Build it with :func:`generate_kb` (cached per ``(seed, num_people)``).
    """

    def __init__(self, seed: int, num_people: int) -> None:
        rng = random.Random(f"search-qa-kb:{seed}:{num_people}")
        names = _Names(rng)
        n_countries, n_cities, n_orgs, n_people = _sizes(num_people)
        country_names = [names.word((2, 2), suffix=rng.choice(("ia", "a", "or", "and")))
                         for _ in range(n_countries)]
        city_country = list(range(n_countries)) + [
            rng.randrange(n_countries) for _ in range(n_cities - n_countries)]
        rng.shuffle(city_country)
        self.cities = [_City(i, names.word(), country) for i, country in enumerate(city_country)]
        self.countries = [
            _Country(k, country_names[k], next(c.index for c in self.cities if c.country == k))
            for k in range(n_countries)]
        first_names = [names.word((2, 2)) for _ in range(max(4, n_people // 2))]
        people: list[_Person] = []
        for i in range(n_people):
            people.append(_Person(
                i, rng.choice(first_names), names.word((2, 3)), rng.randint(1900, 1975),
                rng.randrange(n_cities), rng.randrange(n_orgs), rng.choice(_JOBS)))
        self.people = people
        self.orgs = []
        for j in range(n_orgs):
            founder = rng.randrange(n_people)
            founded = people[founder].birth_year + rng.randint(22, 48)
            self.orgs.append(_Org(j, names.word((2, 3)), rng.choice(_ORG_KINDS), founded,
                                  founder, rng.randrange(n_cities)))
        self.corpus = Corpus(tuple(self._passages()))
        self._kinds: dict[int, list[Callable[[random.Random], Question]]] = {
            1: [self._birth_city, self._birth_year, self._employer, self._job, self._org_founded,
                self._org_founder, self._org_hq, self._city_country, self._country_capital],
            2: [self._employer_founded, self._employer_founder, self._employer_hq,
                self._birth_country, self._founder_birth_year, self._founder_birth_city,
                self._hq_country],
        }

    # ----------------------------------------------------------------- passages

    def _passages(self) -> Iterator[Passage]:
        for p in self.people:
            city = self.cities[p.birth_city].name
            yield Passage(_bio(p), f"{p.name} was born in {city} in {p.birth_year}.")
            yield Passage(_career(p),
                          f"{p.name} works for {self.orgs[p.employer].name} as {_a(p.job)}.")
        for o in self.orgs:
            founder = self.people[o.founder].name
            yield Passage(_founding(o), f"{o.name} was founded in {o.founded} by {founder}.")
            yield Passage(_hq(o), f"{o.name} is headquartered in {self.cities[o.city].name}.")
        for c in self.cities:
            yield Passage(_city(c), f"{c.name} is a city located in "
                                    f"{self.countries[c.country].name}.")
        for k in self.countries:
            yield Passage(_country(k), f"The capital of {k.name} is "
                                       f"{self.cities[k.capital].name}.")

    # ----------------------------------------------------------------- questions

    @property
    def question_kinds(self) -> dict[int, list[str]]:
        """The question kinds by number of hops, e.g. ``{1: ["birth_city", ...], 2: [...]}``."""
        return {hops: [fn.__name__.lstrip("_") for fn in fns]
                for hops, fns in self._kinds.items()}

    def question(self, rng: random.Random, hops: int) -> Question:
        """A question of ``hops`` hops (1 or 2): a uniform kind, then a uniform entity."""
        return rng.choice(self._kinds[hops])(rng)

    # Hops: the supporting passage and the oracle's queries, best first.
    def _bio_hop(self, p: _Person) -> Hop:
        return Hop((_bio(p),), (f"{p.name} born", f"{p.last} born", p.name))

    def _career_hop(self, p: _Person) -> Hop:
        return Hop((_career(p),), (f"{p.name} works", f"{p.last} works for", p.name))

    def _founding_hop(self, o: _Org) -> Hop:
        return Hop((_founding(o),), (f"{o.name} founded", f"{o.word} founded", o.name))

    def _hq_hop(self, o: _Org) -> Hop:
        return Hop((_hq(o),), (f"{o.name} headquartered", f"{o.word} headquartered", o.name))

    def _city_hop(self, c: _City) -> Hop:
        return Hop((_city(c),), (f"{c.name} city located", f"{c.name} city", c.name))

    def _country_hop(self, k: _Country) -> Hop:
        return Hop((_country(k),), (f"capital of {k.name}", f"{k.name} capital", k.name))

    def _org_answers(self, o: _Org) -> tuple[str, ...]:
        return (o.name, o.word)

    def _birth_city(self, rng: random.Random) -> Question:
        p = rng.choice(self.people)
        return Question(f"In which city was {p.name} born?",
                        (self.cities[p.birth_city].name,), (self._bio_hop(p),), "birth_city")

    def _birth_year(self, rng: random.Random) -> Question:
        p = rng.choice(self.people)
        return Question(f"In which year was {p.name} born?", (str(p.birth_year),),
                        (self._bio_hop(p),), "birth_year")

    def _employer(self, rng: random.Random) -> Question:
        p = rng.choice(self.people)
        return Question(f"Which organisation does {p.name} work for?",
                        self._org_answers(self.orgs[p.employer]), (self._career_hop(p),),
                        "employer")

    def _job(self, rng: random.Random) -> Question:
        p = rng.choice(self.people)
        return Question(f"What is the occupation of {p.name}?", (p.job,),
                        (self._career_hop(p),), "job")

    def _org_founded(self, rng: random.Random) -> Question:
        o = rng.choice(self.orgs)
        return Question(f"In which year was {o.name} founded?", (str(o.founded),),
                        (self._founding_hop(o),), "org_founded")

    def _org_founder(self, rng: random.Random) -> Question:
        o = rng.choice(self.orgs)
        return Question(f"Who founded {o.name}?", (self.people[o.founder].name,),
                        (self._founding_hop(o),), "org_founder")

    def _org_hq(self, rng: random.Random) -> Question:
        o = rng.choice(self.orgs)
        return Question(f"In which city is {o.name} headquartered?", (self.cities[o.city].name,),
                        (self._hq_hop(o),), "org_hq")

    def _city_country(self, rng: random.Random) -> Question:
        c = rng.choice(self.cities)
        return Question(f"In which country is {c.name} located?",
                        (self.countries[c.country].name,), (self._city_hop(c),), "city_country")

    def _country_capital(self, rng: random.Random) -> Question:
        k = rng.choice(self.countries)
        return Question(f"What is the capital of {k.name}?", (self.cities[k.capital].name,),
                        (self._country_hop(k),), "country_capital")

    def _employer_founded(self, rng: random.Random) -> Question:
        p = rng.choice(self.people)
        o = self.orgs[p.employer]
        return Question(f"In which year was the employer of {p.name} founded?", (str(o.founded),),
                        (self._career_hop(p), self._founding_hop(o)), "employer_founded")

    def _employer_founder(self, rng: random.Random) -> Question:
        p = rng.choice(self.people)
        o = self.orgs[p.employer]
        return Question(f"Who founded the organisation that {p.name} works for?",
                        (self.people[o.founder].name,),
                        (self._career_hop(p), self._founding_hop(o)), "employer_founder")

    def _employer_hq(self, rng: random.Random) -> Question:
        p = rng.choice(self.people)
        o = self.orgs[p.employer]
        return Question(f"In which city is the employer of {p.name} headquartered?",
                        (self.cities[o.city].name,), (self._career_hop(p), self._hq_hop(o)),
                        "employer_hq")

    def _birth_country(self, rng: random.Random) -> Question:
        p = rng.choice(self.people)
        c = self.cities[p.birth_city]
        return Question(f"In which country was {p.name} born?",
                        (self.countries[c.country].name,), (self._bio_hop(p), self._city_hop(c)),
                        "birth_country")

    def _founder_birth_year(self, rng: random.Random) -> Question:
        o = rng.choice(self.orgs)
        f = self.people[o.founder]
        return Question(f"In which year was the founder of {o.name} born?", (str(f.birth_year),),
                        (self._founding_hop(o), self._bio_hop(f)), "founder_birth_year")

    def _founder_birth_city(self, rng: random.Random) -> Question:
        o = rng.choice(self.orgs)
        f = self.people[o.founder]
        return Question(f"In which city was the founder of {o.name} born?",
                        (self.cities[f.birth_city].name,),
                        (self._founding_hop(o), self._bio_hop(f)), "founder_birth_city")

    def _hq_country(self, rng: random.Random) -> Question:
        o = rng.choice(self.orgs)
        c = self.cities[o.city]
        return Question(f"In which country is {o.name} headquartered?",
                        (self.countries[c.country].name,), (self._hq_hop(o), self._city_hop(c)),
                        "hq_country")


def _a(word: str) -> str:
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def _bio(p: _Person) -> str:
    return f"person-{p.index}-bio"


def _career(p: _Person) -> str:
    return f"person-{p.index}-career"


def _founding(o: _Org) -> str:
    return f"org-{o.index}-founding"


def _hq(o: _Org) -> str:
    return f"org-{o.index}-hq"


def _city(c: _City) -> str:
    return f"city-{c.index}"


def _country(k: _Country) -> str:
    return f"country-{k.index}"


@functools.lru_cache(maxsize=32)
def generate_kb(seed: int, num_people: int = 80) -> KnowledgeBase:
    """The fictional world of ``seed`` with ``num_people`` people (>= 4), and in proportion
    ``num_people // 4`` organisations and cities and ``num_people // 16`` countries (at least
    4, 4 and 2). Deterministic in its arguments, and cached."""
    if isinstance(num_people, bool) or not isinstance(num_people, int) or num_people < 4:
        raise ValueError(f"{ENV_ID}: num_people must be an int >= 4, got {num_people!r}")
    return KnowledgeBase(seed, num_people)


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
