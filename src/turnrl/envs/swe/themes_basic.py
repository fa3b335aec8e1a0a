"""The library's general themes: text, list and number utilities (see :mod:`.library`).

Each function is kept as source text and is correct; the generator injects bugs into copies.
"""

from __future__ import annotations

import random

from turnrl.envs.swe.entry import (
    Args,
    LibraryFunction,
    Theme,
    either,
    int_list,
    sentence,
    spaced,
    with_optional,
)

THEMES = (
    Theme("text", ("text", "strings", "textutil", "wording"),
          "Text helpers: padding, shortening, counting words and capitalizing titles."),
    Theme("lists", ("lists", "seqs", "listutil", "sequences"),
          "List helpers: chunks, windows, rotations and differences."),
    Theme("numbers", ("numeric", "mathutil", "arith", "calc"),
          "Integer arithmetic helpers: clamping, rounding, percentages and averages."),
)


def _pad_left(rng: random.Random) -> Args:
    text = either(rng, ["", "7", "1234"], lambda: str(rng.randint(0, 99999)))
    return with_optional(rng, (text, rng.randint(0, 6)), (rng.choice([" ", "*", "0"]),))


def _truncate(rng: random.Random) -> Args:
    text = either(rng, ["", "hello world", "abc"], lambda: sentence(rng, 4))
    return with_optional(rng, (text,), (rng.randint(0, 14), rng.choice(["..", "~", "..."])))


def _count_words(rng: random.Random) -> Args:
    text = either(rng, ["", "   ", "a bb ccc"], lambda: spaced(rng, 6))
    return with_optional(rng, (text,), (rng.randint(0, 6),))


def _initials(rng: random.Random) -> Args:
    return (either(rng, ["", "ada king lovelace", "x"], lambda: spaced(rng, 3)),)


def _title_case(rng: random.Random) -> Args:
    return (either(rng, ["", "the lord of the rings", "a"], lambda: spaced(rng, 5)),)


def _items_and_size(rng: random.Random) -> Args:
    items = either(rng, [[], [4], [1, 2, 3, 4, 5]], lambda: int_list(rng, most=7))
    return with_optional(rng, (items,), (rng.randint(-1, 5),))


def _values(rng: random.Random) -> Args:
    return (either(rng, [[], [5], [3, 3]], lambda: int_list(rng, most=6)),)


def _rotate(rng: random.Random) -> Args:
    items = either(rng, [[], [1], [1, 2, 3, 4]], lambda: int_list(rng, most=6))
    return (items, either(rng, [0, 1, -1], lambda: rng.randint(-7, 9)))


def _clamp(rng: random.Random) -> Args:
    low = rng.randint(-10, 10)
    high = low + rng.randint(0, 12)
    return (either(rng, [low, high, low - 1, high + 1], lambda: rng.randint(-25, 25)), low, high)


def _ceil_div(rng: random.Random) -> Args:
    return (either(rng, [0, 1, 12], lambda: rng.randint(0, 60)), rng.randint(1, 9))


def _percent_of(rng: random.Random) -> Args:
    amount = either(rng, [0, 1, 50, 999], lambda: rng.randint(0, 5000))
    return (amount, either(rng, [0, 50, 100, 5], lambda: rng.randint(0, 120)))


def _digit_sum(rng: random.Random) -> Args:
    return (either(rng, [0, 9, 10, -12, 4096], lambda: rng.randint(-99999, 99999)),)


def _round_to(rng: random.Random) -> Args:
    value = either(rng, [0, 12, 13, -12, 7], lambda: rng.randint(-60, 60))
    return with_optional(rng, (value,), (rng.randint(1, 10),))


TEXT = (
    LibraryFunction("pad_left", "text", "padding numbers with leading zeros", '''\
def pad_left(text: str, width: int, fill: str = "0") -> str:
    """Return ``text`` padded on the left with ``fill`` up to ``width`` characters.

    Text of ``width`` characters or more comes back unchanged:
    ``pad_left("7", 3)`` is ``"007"`` and ``pad_left("1234", 3)`` is ``"1234"``.
    """
    missing = width - len(text)
    if missing <= 0:
        return text
    return fill * missing + text
''', _pad_left),
    LibraryFunction("truncate", "text", "shortening long text with an ellipsis", '''\
def truncate(text: str, width: int = 10, marker: str = "...") -> str:
    """Shorten ``text`` to at most ``width`` characters, ending with ``marker`` when cut.

    Text of ``width`` characters or fewer comes back unchanged. Longer text keeps its first
    ``width - len(marker)`` characters followed by the marker, so the result is exactly
    ``width`` characters long; when ``width`` leaves no room for the marker, the result is
    the first ``width`` characters of the text. ``truncate("hello world", 8)`` is
    ``"hello..."``.
    """
    if len(text) <= width:
        return text
    if width <= len(marker):
        return text[:width]
    return text[:width - len(marker)] + marker
''', _truncate),
    LibraryFunction("count_words", "text", "counting the words of a text", '''\
def count_words(text: str, min_length: int = 1) -> int:
    """Count the words of ``text`` (runs of non-space characters) that have at least
    ``min_length`` characters.

    ``count_words("a bb ccc", 2)`` is ``2``; an empty or blank text has no words.
    """
    count = 0
    for word in text.split():
        if len(word) >= min_length:
            count += 1
    return count
''', _count_words),
    LibraryFunction("initials", "text", "turning names into initials", '''\
def initials(name: str) -> str:
    """Return the initials of ``name``: the first letter of each word, upper-cased and
    followed by a dot.

    ``initials("ada king lovelace")`` is ``"A.K.L."``; a blank name gives ``""``.
    """
    letters = []
    for part in name.split():
        letters.append(part[0].upper() + ".")
    return "".join(letters)
''', _initials),
    LibraryFunction("title_case", "text", "capitalizing titles", '''\
def title_case(text: str) -> str:
    """Capitalize each word of ``text``, except the small words "a", "an", "of", "the" and
    "and", which stay lower case unless they come first. Runs of spaces become one space.

    ``title_case("the lord of the rings")`` is ``"The Lord of the Rings"``.
    """
    words = []
    for index, word in enumerate(text.lower().split()):
        if index > 0 and word in ("a", "an", "of", "the", "and"):
            words.append(word)
        else:
            words.append(word[:1].upper() + word[1:])
    return " ".join(words)
''', _title_case),
)

LISTS = (
    LibraryFunction("chunk", "lists", "splitting a list into groups", '''\
def chunk(items: list, size: int = 2) -> list:
    """Split ``items`` into consecutive chunks of ``size`` items; the last chunk holds what
    is left and may be shorter. A size below 1 counts as 1.

    ``chunk([1, 2, 3, 4, 5], 2)`` is ``[[1, 2], [3, 4], [5]]``.
    """
    if size < 1:
        size = 1
    chunks = []
    for start in range(0, len(items), size):
        chunks.append(items[start:start + size])
    return chunks
''', _items_and_size),
    LibraryFunction("last_n", "lists", "taking the last few items of a list", '''\
def last_n(items: list, n: int = 3) -> list:
    """Return the last ``n`` items of ``items`` in their order: all of them when there are
    fewer than ``n``, none when ``n`` is 0 or negative.

    ``last_n([1, 2, 3, 4], 2)`` is ``[3, 4]``.
    """
    if n <= 0:
        return []
    return items[-n:]
''', _items_and_size),
    LibraryFunction("moving_sum", "lists", "summing a sliding window over a list", '''\
def moving_sum(values: list, window: int = 3) -> list:
    """Return the sum of every run of ``window`` consecutive values, in order.

    ``moving_sum([1, 2, 3, 4], 2)`` is ``[3, 5, 7]``. A list shorter than the window has no
    sums, and neither has a window below 1.
    """
    if window < 1:
        return []
    sums = []
    for start in range(len(values) - window + 1):
        sums.append(sum(values[start:start + window]))
    return sums
''', _items_and_size),
    LibraryFunction("pairwise_diffs", "lists", "taking the differences between neighbours", '''\
def pairwise_diffs(values: list) -> list:
    """Return the difference between each value and the one before it.

    ``pairwise_diffs([3, 5, 4])`` is ``[2, -1]``; fewer than two values give ``[]``.
    """
    diffs = []
    for index in range(1, len(values)):
        diffs.append(values[index] - values[index - 1])
    return diffs
''', _values),
    LibraryFunction("rotate", "lists", "rotating a list", '''\
def rotate(items: list, steps: int) -> list:
    """Rotate ``items`` left by ``steps`` places (right when ``steps`` is negative): at each
    step the first item moves to the end.

    ``rotate([1, 2, 3, 4], 1)`` is ``[2, 3, 4, 1]``; an empty list stays empty.
    """
    if not items:
        return []
    shift = steps % len(items)
    return items[shift:] + items[:shift]
''', _rotate),
)

NUMBERS = (
    LibraryFunction("clamp", "numbers", "keeping a number inside a range", '''\
def clamp(value: int, low: int, high: int) -> int:
    """Return ``value`` limited to the range from ``low`` to ``high``, both included.

    ``clamp(15, 0, 10)`` is ``10``, ``clamp(-3, 0, 10)`` is ``0``, ``clamp(4, 0, 10)`` is ``4``.
    """
    if value < low:
        return low
    if value > high:
        return high
    return value
''', _clamp),
    LibraryFunction("ceil_div", "numbers", "dividing and rounding up", '''\
def ceil_div(numerator: int, denominator: int) -> int:
    """Divide and round up: the number of groups of ``denominator`` things needed to hold
    ``numerator`` things.

    ``ceil_div(7, 3)`` is ``3``, ``ceil_div(6, 3)`` is ``2`` and ``ceil_div(0, 3)`` is ``0``.
    """
    return (numerator + denominator - 1) // denominator
''', _ceil_div),
    LibraryFunction("percent_of", "numbers", "taking a percentage of an amount", '''\
def percent_of(amount: int, percent: int) -> int:
    """Return ``percent`` percent of ``amount``, rounded to the nearest whole number (halves
    round up).

    ``percent_of(250, 10)`` is ``25`` and ``percent_of(999, 5)`` is ``50``.
    """
    return (amount * percent + 50) // 100
''', _percent_of),
    LibraryFunction("digit_sum", "numbers", "adding up the digits of a number", '''\
def digit_sum(number: int) -> int:
    """Return the sum of the decimal digits of ``number``, ignoring its sign.

    ``digit_sum(4096)`` is ``19``, ``digit_sum(-12)`` is ``3`` and ``digit_sum(0)`` is ``0``.
    """
    number = abs(number)
    total = 0
    while number > 0:
        total += number % 10
        number //= 10
    return total
''', _digit_sum),
    LibraryFunction("average", "numbers", "averaging a list of numbers", '''\
def average(values: list) -> int:
    """Return the average of ``values`` rounded down to a whole number; an empty list
    averages ``0``.

    ``average([3, 4, 6])`` is ``4``.
    """
    if not values:
        return 0
    return sum(values) // len(values)
''', _values),
    LibraryFunction("round_to", "numbers", "rounding to a multiple", '''\
def round_to(value: int, step: int = 5) -> int:
    """Round ``value`` to the nearest multiple of ``step``; a value halfway between two
    multiples rounds up.

    ``round_to(12)`` is ``10``, ``round_to(13)`` is ``15`` and ``round_to(7, 2)`` is ``8``.
    """
    return (value + step // 2) // step * step
''', _round_to),
)

FUNCTIONS = TEXT + LISTS + NUMBERS
