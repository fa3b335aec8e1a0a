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

This module is the public home of those names: the data types and file loaders live in
:mod:`turnrl.envs.builtin.kb_corpus`, the generator in :mod:`turnrl.envs.builtin.kb_world`.
"""

from turnrl.envs.builtin.kb_corpus import (
    Corpus,
    Hop,
    KnowledgeBaseError,
    Passage,
    Question,
    load_corpus,
    load_questions,
)
from turnrl.envs.builtin.kb_world import KnowledgeBase, generate_kb

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
