"""Money helpers; every amount is a whole number of cents."""


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


def bulk_price(unit_price: int, quantity: int, free_every: int = 3) -> int:
    """Return the price of ``quantity`` items at ``unit_price`` cents each when every
    ``free_every``-th item is free (buy two, get the third free, by default). A
    ``free_every`` of 0 or less means that no item is free.

    ``bulk_price(100, 7)`` is ``500``: two of the seven items are free.
    """
    if free_every <= 0:
        return unit_price * quantity
    free = quantity % free_every
    return unit_price * (quantity - free)
