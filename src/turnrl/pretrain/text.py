"""Random text for the pretraining corpus: pseudo-words, names, codes, numbers and filler.

Everything is drawn from a ``random.Random`` the caller owns, so a corpus is a pure function of
its seed. The words are made of syllables, not taken from any dictionary or env, so a skill
learned on them (copy it, look it up, call a tool with it) is a skill over arbitrary strings.

A name is *held out* (:func:`held_out`) when its CRC-32 falls in one eighth of the range: the
corpus never uses such names for tools or their arguments, and the probes use only them, so a
probe's tool schemas are unseen by construction.
"""

from __future__ import annotations

import math
import random
import string
import zlib

ONSETS = ("b", "br", "d", "dr", "f", "g", "gl", "h", "k", "kr", "l", "m", "n", "p", "pl",
          "r", "s", "st", "t", "tr", "v", "z", "sh", "ch")
VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ea")
CODAS = ("", "", "", "n", "r", "s", "l", "k", "m", "t")
CODE_ALPHABET = string.ascii_uppercase + string.digits
MIXED_ALPHABET = string.ascii_letters + string.digits


def held_out(name: str) -> bool:
    """True for the eighth of all names kept for the probes (CRC-32 of the name mod 8 == 0)."""
    return zlib.crc32(name.encode()) % 8 == 0


def word(rng: random.Random, syllables: tuple[int, int] = (1, 3)) -> str:
    """A pronounceable pseudo-word of ``syllables`` (inclusive range) syllables."""
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                   for _ in range(rng.randint(*syllables)))


def words(rng: random.Random, n: int, syllables: tuple[int, int] = (1, 3)) -> list[str]:
    """``n`` distinct pseudo-words."""
    found: dict[str, None] = {}
    while len(found) < n:
        found[word(rng, syllables)] = None
    return list(found)


def name(rng: random.Random) -> str:
    """A capitalised name of one or two pseudo-words (a person, a place, a thing)."""
    return " ".join(word(rng, (1, 2)).capitalize() for _ in range(rng.choice((1, 1, 2))))


def identifier(rng: random.Random, *, probe: bool = False) -> str:
    """A tool or argument name (``snake_case`` of pseudo-words); held out iff ``probe``."""
    while True:
        parts = [word(rng, (1, 2)) for _ in range(rng.choice((1, 1, 2)))]
        text = "_".join(parts)
        if held_out(text) == probe:
            return text


def code(rng: random.Random, length: int | None = None, alphabet: str = CODE_ALPHABET) -> str:
    """A random string such as ``K7Q2XB`` (``length`` 3-10 when not given)."""
    return "".join(rng.choice(alphabet) for _ in range(length or rng.randint(3, 10)))


def number(rng: random.Random, digits: tuple[int, int] = (1, 4)) -> int:
    """A non-negative integer with a number of digits drawn from ``digits`` (inclusive)."""
    n = rng.randint(*digits)
    return rng.randint(0 if n == 1 else 10 ** (n - 1), 10**n - 1)


def value(rng: random.Random) -> str:
    """A value to store, look up or pass to a tool: a word, a name, a number or a code."""
    kind = rng.randrange(4)
    if kind == 0:
        return word(rng)
    if kind == 1:
        return name(rng)
    if kind == 2:
        return str(number(rng))
    return code(rng)


def sentence(rng: random.Random) -> str:
    """A filler sentence of 3-10 pseudo-words, capitalised and ending in a full stop."""
    text = " ".join(word(rng) for _ in range(rng.randint(3, 10)))
    return text.capitalize() + rng.choice((".", ".", ".", "!", "?"))


def filler(rng: random.Random, length: int) -> str:
    """Filler text of exactly ``length`` characters (sentences, cut to fit; ``""`` for 0)."""
    parts: list[str] = []
    size = 0
    while size < length:
        parts.append(sentence(rng))
        size += len(parts[-1]) + 1
    return " ".join(parts)[:length]


def log_uniform(rng: random.Random, low: int, high: int) -> int:
    """An integer in ``[low, high]``, uniform in log(1 + x): short and long equally likely
    per doubling."""
    return min(high, int(math.expm1(rng.uniform(math.log1p(low), math.log1p(high)))))
