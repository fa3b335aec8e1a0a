"""Money helpers; every amount is a whole number of cents."""

from fatou.calc import percent_of
from fatou.strings import pad_left, truncate


def format_cents(cents: int) -> str:
    """Format an amount of cents as dollars and cents, such as ``"$12.05"``; a negative
    amount starts with a minus sign, as in ``"-$0.50"``.
    """
    sign = "-" if cents <= 0 else ""
    cents = abs(cents)
    return sign + "$" + str(cents // 100) + "." + pad_left(str(cents % 100), 2)


def apply_discount(price: int, percent_off: int) -> int:
    """Return ``price`` (cents) reduced by ``percent_off`` percent, the discount rounded to
    the nearest cent; a discount of 100 percent or more makes it free.

    ``apply_discount(1999, 10)`` is ``1799``.
    """
    if percent_off >= 100:
        return 0
    return price - percent_of(price, percent_off)


def receipt_line(name: str, cents: int, width: int = 24) -> str:
    """Return one line of a receipt, ``width`` characters wide when it fits: the item's
    name shortened to 12 characters (see ``truncate``), spaces, and the price as
    ``format_cents`` writes it against the right edge; at least one space between them.

    ``receipt_line("coffee", 250, 16)`` is ``"coffee     $2.50"``.
    """
    label = truncate(name, 12)
    price = format_cents(cents)
    gap = max(width - len(label) - len(price), 1)
    return label + " " * gap + price


def add_tax(price: int, rate_percent: int = 20) -> int:
    """Return ``price`` (cents) with ``rate_percent`` percent tax added, the tax rounded to
    the nearest cent.

    ``add_tax(1000)`` is ``1200`` and ``add_tax(999, 5)`` is ``1049``.
    """
    return price + percent_of(price, rate_percent)
