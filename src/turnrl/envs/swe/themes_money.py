"""The library's calendar and money themes: dates and clock times as plain integers, and
amounts in cents (see :mod:`.library`).

Each function is kept as source text and is correct; the generator injects bugs into copies.
Some call functions of the ``text`` and ``numbers`` themes (:mod:`.themes_basic`).
"""

from __future__ import annotations

import random

from turnrl.envs.swe.entry import (
    YEARS,
    Args,
    LibraryFunction,
    Theme,
    either,
    sentence,
    with_optional,
)

THEMES = (
    Theme("dates", ("dates", "timeutil", "calendar_days", "clock"),
          "Calendar and clock helpers; dates are (year, month, day) and times are minutes."),
    Theme("money", ("money", "pricing", "billing", "prices"),
          "Money helpers; every amount is a whole number of cents."),
)


def _year(rng: random.Random) -> Args:
    return (either(rng, YEARS, lambda: rng.randint(1800, 2400), edge_share=0.6),)


def _year_month(rng: random.Random) -> Args:
    return (_year(rng)[0], either(rng, [1, 2, 12], lambda: rng.randint(1, 12)))


def _date(rng: random.Random) -> Args:
    year, month = _year_month(rng)
    return (year, month, either(rng, [1, 28], lambda: rng.randint(1, 28)))


def _clock(rng: random.Random) -> Args:
    return (either(rng, [0, 59, 60, 1439, 1440, 1500], lambda: rng.randint(0, 3000)),)


def _duration(rng: random.Random) -> Args:
    start = either(rng, [0, 600, 1380], lambda: rng.randint(0, 1439))
    return (start, either(rng, [start, 0, 1439], lambda: rng.randint(0, 1439)))


def _cents(rng: random.Random) -> Args:
    return (either(rng, [0, 5, 100, -50, 1205], lambda: rng.randint(-20000, 20000)),)


def _price(rng: random.Random) -> int:
    return either(rng, [0, 100, 1999], lambda: rng.randint(1, 9999))


def _discount(rng: random.Random) -> Args:
    return (_price(rng), either(rng, [0, 10, 100, 150], lambda: rng.randint(0, 99)))


def _split_bill(rng: random.Random) -> Args:
    return (either(rng, [0, 1000, 7], lambda: rng.randint(0, 5000)),
            either(rng, [0, 1, 3], lambda: rng.randint(0, 6)))


def _bulk_price(rng: random.Random) -> Args:
    required = (_price(rng), either(rng, [0, 2, 3, 7], lambda: rng.randint(0, 12)))
    return with_optional(rng, required, (rng.randint(0, 5),))


def _add_tax(rng: random.Random) -> Args:
    return with_optional(rng, (_price(rng),), (rng.choice([0, 5, 7, 20, 25]),))


def _receipt_line(rng: random.Random) -> Args:
    name = either(rng, ["", "coffee", "chocolate cake slice"], lambda: sentence(rng, 3))
    return with_optional(rng, (name, _cents(rng)[0]), (rng.randint(0, 30),))


def _invoice(rng: random.Random) -> Args:
    prices = [_price(rng) for _ in range(rng.randint(0, 4))]
    return with_optional(rng, (prices,), (rng.choice([0, 10, 25, 100]), rng.choice([0, 5, 20])))


DATES = (
    LibraryFunction("is_leap_year", "dates", "checking for leap years", '''\
def is_leap_year(year: int) -> bool:
    """Tell whether ``year`` is a leap year of the Gregorian calendar: every fourth year,
    except whole centuries, which are leap years only when divisible by 400.

    ``is_leap_year(2024)`` and ``is_leap_year(2000)`` are true; ``is_leap_year(1900)`` is not.
    """
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0
''', _year),
    LibraryFunction("days_in_month", "dates", "looking up how many days a month has", '''\
def days_in_month(year: int, month: int) -> int:
    """Return the number of days of ``month`` (1 to 12) in ``year``; February has 29 days
    in leap years and 28 otherwise.

    ``days_in_month(2023, 2)`` is ``28`` and ``days_in_month(2023, 4)`` is ``30``.
    """
    if month == 2:
        if is_leap_year(year):
            return 29
        return 28
    if month in (4, 6, 9, 11):
        return 30
    return 31
''', _year_month),
    LibraryFunction("day_of_year", "dates", "numbering the days of the year", '''\
def day_of_year(year: int, month: int, day: int) -> int:
    """Return the position of a date in its year, ``1`` for January 1st.

    ``day_of_year(2023, 3, 1)`` is ``60``; in a leap year, such as 2024, it is ``61``.
    """
    total = day
    for earlier in range(1, month):
        total += days_in_month(year, earlier)
    return total
''', _date),
    LibraryFunction("week_number", "dates", "working out week numbers", '''\
def week_number(year: int, month: int, day: int) -> int:
    """Return the week of its year a date falls in: January 1st to 7th are week 1, the 8th
    to the 14th week 2, and so on.

    ``week_number(2023, 1, 8)`` is ``2`` and ``week_number(2023, 12, 31)`` is ``53``.
    """
    return (day_of_year(year, month, day) - 1) // 7 + 1
''', _date),
    LibraryFunction("weeks_left", "dates", "counting the weeks left in a year", '''\
def weeks_left(year: int, month: int, day: int) -> int:
    """Return how many weeks of the year come after the week of the given date, with weeks
    numbered as ``week_number`` does them; ``0`` in the last week of December.

    ``weeks_left(2023, 12, 24)`` is ``1`` and ``weeks_left(2023, 1, 1)`` is ``52``.
    """
    return week_number(year, 12, 31) - week_number(year, month, day)
''', _date),
    LibraryFunction("format_clock", "dates", "showing times on a 24-hour clock", '''\
def format_clock(minutes: int) -> str:
    """Format a number of minutes after midnight as a 24-hour clock time ``"HH:MM"``; times
    past midnight wrap around into the next day.

    ``format_clock(75)`` is ``"01:15"`` and ``format_clock(1500)`` is ``"01:00"``.
    """
    minutes = minutes % (24 * 60)
    hours = minutes // 60
    return pad_left(str(hours), 2) + ":" + pad_left(str(minutes % 60), 2)
''', _clock),
    LibraryFunction("duration_between", "dates", "measuring the time between two clock times",
                    '''\
def duration_between(start: int, end: int) -> int:
    """Return the minutes from the clock time ``start`` to the clock time ``end`` (both in
    minutes after midnight), going past midnight when ``end`` is earlier than ``start``.

    ``duration_between(600, 660)`` is ``60`` and ``duration_between(1380, 60)`` is ``120``.
    """
    if end >= start:
        return end - start
    return end + 24 * 60 - start
''', _duration),
)

MONEY = (
    LibraryFunction("format_cents", "money", "showing amounts as dollars", '''\
def format_cents(cents: int) -> str:
    """Format an amount of cents as dollars and cents, such as ``"$12.05"``; a negative
    amount starts with a minus sign, as in ``"-$0.50"``.
    """
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return sign + "$" + str(cents // 100) + "." + pad_left(str(cents % 100), 2)
''', _cents),
    LibraryFunction("receipt_line", "money", "printing receipts", '''\
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
''', _receipt_line),
    LibraryFunction("apply_discount", "money", "applying a percentage discount to a price",
                    '''\
def apply_discount(price: int, percent_off: int) -> int:
    """Return ``price`` (cents) reduced by ``percent_off`` percent, the discount rounded to
    the nearest cent; a discount of 100 percent or more makes it free.

    ``apply_discount(1999, 10)`` is ``1799``.
    """
    if percent_off >= 100:
        return 0
    return price - percent_of(price, percent_off)
''', _discount),
    LibraryFunction("split_bill", "money", "splitting a bill between people", '''\
def split_bill(total: int, people: int) -> list:
    """Split ``total`` cents between ``people`` as evenly as possible: the first shares get
    one cent more until the remainder is used up. No people means no shares.

    ``split_bill(1000, 3)`` is ``[334, 333, 333]``.
    """
    if people <= 0:
        return []
    base = total // people
    extra = total % people
    shares = []
    for index in range(people):
        if index < extra:
            shares.append(base + 1)
        else:
            shares.append(base)
    return shares
''', _split_bill),
    LibraryFunction("bulk_price", "money", "pricing 'buy two, get one free' offers", '''\
def bulk_price(unit_price: int, quantity: int, free_every: int = 3) -> int:
    """Return the price of ``quantity`` items at ``unit_price`` cents each when every
    ``free_every``-th item is free (buy two, get the third free, by default). A
    ``free_every`` of 0 or less means that no item is free.

    ``bulk_price(100, 7)`` is ``500``: two of the seven items are free.
    """
    if free_every <= 0:
        return unit_price * quantity
    free = quantity // free_every
    return unit_price * (quantity - free)
''', _bulk_price),
    LibraryFunction("add_tax", "money", "adding sales tax to a price", '''\
def add_tax(price: int, rate_percent: int = 20) -> int:
    """Return ``price`` (cents) with ``rate_percent`` percent tax added, the tax rounded to
    the nearest cent.

    ``add_tax(1000)`` is ``1200`` and ``add_tax(999, 5)`` is ``1049``.
    """
    return price + percent_of(price, rate_percent)
''', _add_tax),
    LibraryFunction("invoice_total", "money", "totalling an invoice", '''\
def invoice_total(prices: list, discount_percent: int = 0, tax_percent: int = 20) -> int:
    """Return the amount due for ``prices`` (cents): their sum less ``discount_percent``
    percent, plus ``tax_percent`` percent tax on the discounted sum. See ``apply_discount``
    and ``add_tax`` for the rounding.

    ``invoice_total([500, 500], 10)`` is ``1080``; an empty invoice is ``0``.
    """
    subtotal = apply_discount(sum(prices), discount_percent)
    return add_tax(subtotal, tax_percent)
''', _invoice),
)

FUNCTIONS = DATES + MONEY
