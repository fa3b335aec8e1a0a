"""The types of the generator's function library, and the draws its input generators share.

A :class:`Theme` becomes one module of a generated package (``text``, ``dates``, ...); a
:class:`LibraryFunction` is one correct, pure, documented function of a theme, kept as source
text, with an input generator that draws the arguments of its tests (edge cases included:
empty lists, zero, boundaries). Values are ints, strings, lists, tuples, dicts and bools
only, so a test can write the expected value with ``repr()``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Args = tuple[Any, ...]
"""The positional arguments of one call of a library function."""

InputGenerator = Callable[[random.Random], Args]
"""Draws the arguments of one test call from a seeded ``random.Random``."""


@dataclass(frozen=True)
class Theme:
    """One module of a generated package.

    ``key`` names the theme in the library; ``module_names`` are the names its module may
    take (one is drawn per package); ``summary`` is the module's docstring and its line in
    the package's README.
    """

    key: str
    module_names: tuple[str, ...]
    summary: str


@dataclass(frozen=True)
class LibraryFunction:
    """One correct library function.

    ``source`` is its ``def`` (type hints and a docstring that states its behaviour as a
    user would read it), starting at column 0 and ending with a newline; ``task`` is what a
    user does with it, in words (``"splitting a bill between people"``), for issue texts
    that do not name the function; ``inputs`` draws the arguments of one test call.
    """

    name: str
    theme: str
    task: str
    source: str
    inputs: InputGenerator


WORDS = ("apple", "river", "stone", "a", "of", "the", "and", "blue", "moon", "x", "quick",
         "an", "garden", "tea", "sky", "o")
ITEMS = ("nails", "screws", "bolts", "hinges", "washers", "glue", "tape")
YEARS = (1900, 2000, 2023, 2024, 2100, 1996, 2019, 2400)


def sentence(rng: random.Random, most: int = 6) -> str:
    """Return up to ``most`` words from :data:`WORDS` joined by single spaces (maybe ``""``)."""
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, most)))


def spaced(rng: random.Random, most: int = 5) -> str:
    """Return a :func:`sentence` whose gaps are one to three spaces, sometimes with spaces
    around it too."""
    text = ""
    for word in (rng.choice(WORDS) for _ in range(rng.randint(0, most))):
        text += " " * rng.randint(1, 3) + word if text else word
    return " " * rng.randint(0, 2) + text + " " * rng.randint(0, 2)


def int_list(rng: random.Random, low: int = -9, high: int = 20, most: int = 6) -> list[int]:
    """Return a list of up to ``most`` ints from ``low`` to ``high`` (maybe empty)."""
    return [rng.randint(low, high) for _ in range(rng.randint(0, most))]


def stock(rng: random.Random, most: int = 4, high: int = 30) -> dict[str, int]:
    """Return an item name → count dict over :data:`ITEMS`, counts from 0 to ``high``."""
    names = rng.sample(ITEMS, rng.randint(0, most))
    return {name: rng.randint(0, high) for name in names}


def either(rng: random.Random, edges: Sequence[Any], draw: Callable[[], Any],
           edge_share: float = 0.35) -> Any:
    """Return one of ``edges`` with probability ``edge_share``, else ``draw()``."""
    return rng.choice(edges) if rng.random() < edge_share else draw()


def with_optional(rng: random.Random, required: Args, optional: Args) -> Args:
    """Return ``required`` followed by a random prefix of ``optional`` (the parameters with
    defaults), so that tests call the function both with and without its defaults."""
    return required + optional[:rng.randint(0, len(optional))]
