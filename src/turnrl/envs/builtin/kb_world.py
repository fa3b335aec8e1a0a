"""The generated knowledge base of ``search-qa-v0``: a fictional world drawn from a seed.

Owns :class:`KnowledgeBase` (countries, cities, organisations and people with syllable names,
their passages, and the single- and two-hop question sampler) and :func:`generate_kb`, which
builds and caches it per ``(seed, num_people)``. The data types it produces
(:class:`~turnrl.envs.builtin.kb_corpus.Passage`, ``Corpus``, ``Hop``, ``Question``) live in
:mod:`turnrl.envs.builtin.kb_corpus`; :mod:`turnrl.envs.builtin.kb` is the public home of both.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from turnrl.envs.builtin.kb_corpus import ENV_ID, Corpus, Hop, Passage, Question

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
