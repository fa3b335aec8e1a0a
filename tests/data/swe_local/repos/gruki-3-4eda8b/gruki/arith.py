"""Integer arithmetic helpers: clamping, rounding, percentages and averages."""


def percent_of(amount: int, percent: int) -> int:
    """Return ``percent`` percent of ``amount``, rounded to the nearest whole number (halves
    round up).

    ``percent_of(250, 10)`` is ``25`` and ``percent_of(999, 5)`` is ``50``.
    """
    return (amount * percent + 500) // 100


def ceil_div(numerator: int, denominator: int) -> int:
    """Divide and round up: the number of groups of ``denominator`` things needed to hold
    ``numerator`` things.

    ``ceil_div(7, 3)`` is ``3``, ``ceil_div(6, 3)`` is ``2`` and ``ceil_div(0, 3)`` is ``0``.
    """
    return (numerator + denominator - 1) // denominator


def clamp(value: int, low: int, high: int) -> int:
    """Return ``value`` limited to the range from ``low`` to ``high``, both included.

    ``clamp(15, 0, 10)`` is ``10``, ``clamp(-3, 0, 10)`` is ``0``, ``clamp(4, 0, 10)`` is ``4``.
    """
    if value < low:
        return low
    if value > high:
        return high
    return value


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
