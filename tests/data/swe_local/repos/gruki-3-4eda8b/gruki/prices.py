"""Money helpers; every amount is a whole number of cents."""

from gruki.arith import percent_of


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


def add_tax(price: int, rate_percent: int = 20) -> int:
    """Return ``price`` (cents) with ``rate_percent`` percent tax added, the tax rounded to
    the nearest cent.

    ``add_tax(1000)`` is ``1200`` and ``add_tax(999, 5)`` is ``1049``.
    """
    return price + percent_of(price, rate_percent)


def invoice_total(prices: list, discount_percent: int = 0, tax_percent: int = 20) -> int:
    """Return the amount due for ``prices`` (cents): their sum less ``discount_percent``
    percent, plus ``tax_percent`` percent tax on the discounted sum. See ``apply_discount``
    and ``add_tax`` for the rounding.

    ``invoice_total([500, 500], 10)`` is ``1080``; an empty invoice is ``0``.
    """
    subtotal = apply_discount(sum(prices), discount_percent)
    return add_tax(subtotal, tax_percent)


def apply_discount(price: int, percent_off: int) -> int:
    """Return ``price`` (cents) reduced by ``percent_off`` percent, the discount rounded to
    the nearest cent; a discount of 100 percent or more makes it free.

    ``apply_discount(1999, 10)`` is ``1799``.
    """
    if percent_off >= 100:
        return 0
    return price - percent_of(price, percent_off)
