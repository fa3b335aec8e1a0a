"""Integer arithmetic helpers: clamping, rounding, percentages and averages."""


def percent_of(amount: int, percent: int) -> int:
    """Return ``percent`` percent of ``amount``, rounded to the nearest whole number (halves
    round up).

    ``percent_of(250, 10)`` is ``25`` and ``percent_of(999, 5)`` is ``50``.
    """
    return (amount * percent + 50) // 100


def round_to(value: int, step: int = 5) -> int:
    """Round ``value`` to the nearest multiple of ``step``; a value halfway between two
    multiples rounds up.

    ``round_to(12)`` is ``10``, ``round_to(13)`` is ``15`` and ``round_to(7, 2)`` is ``8``.
    """
    return (value + step // 2) // step * step


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


def average(values: list) -> int:
    """Return the average of ``values`` rounded down to a whole number; an empty list
    averages ``0``.

    ``average([3, 4, 6])`` is ``4``.
    """
    if not values:
        return 0
    return sum(values) // len(values)
