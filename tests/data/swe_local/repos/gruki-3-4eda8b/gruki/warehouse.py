"""Stock keeping: a stock maps item names to how many are left."""

from gruki.arith import ceil_div


def restock(stock: dict, item: str, amount: int) -> dict:
    """Return a copy of ``stock`` (item name to count) with ``amount`` more of ``item``;
    an item that was not in stock yet is added at the end. ``stock`` itself is unchanged.

    ``restock({"nails": 3}, "nails", 5)`` is ``{"nails": 8}``.
    """
    updated = dict(stock)
    updated[item] = updated.get(item, 0) + amount
    return updated


def remove_items(stock: dict, item: str, amount: int) -> dict:
    """Return a copy of ``stock`` with ``amount`` fewer of ``item``; a count never goes
    below zero, and an item whose count reaches zero is left out.

    ``remove_items({"nails": 3, "glue": 2}, "nails", 5)`` is ``{"glue": 2}``.
    """
    updated = dict(stock)
    left = updated.get(item, 0) - amount
    if left > 0:
        updated[item] = left
    else:
        updated.pop(item, None)
    return updated


def order_cost(stock: dict, pack_price: int, target: int = 20) -> int:
    """Return the cost in cents of the restocking order for ``stock`` (see
    ``packs_needed``): the number of packs to order times ``pack_price``.

    ``order_cost({"nails": 5, "glue": 30}, 450)`` is ``1350``.
    """
    total_packs = 0
    for packs in packs_needed(stock, target).values():
        total_packs += packs
    return total_packs * pack_price


def packs_needed(stock: dict, target: int = 20) -> dict:
    """Return, for each item of ``stock`` below ``target``, the number of packs of 6 to
    order (see ``reorder_quantity``); items that need no packs are left out.

    ``packs_needed({"nails": 5, "glue": 30})`` is ``{"nails": 3}``.
    """
    orders = {}
    for name, count in stock.items():
        packs = reorder_quantity(count, target)
        if packs > 0:
            orders[name] = packs
    return orders


def reorder_quantity(count: int, target: int = 20, pack: int = 6) -> int:
    """Return how many packs of ``pack`` items to order to bring ``count`` up to at least
    ``target``; none when the count already reaches the target.

    ``reorder_quantity(5)`` is ``3``: 15 items are missing, and two packs of 6 are too few.
    """
    if count >= target:
        return 0
    return ceil_div(target - count, pack)
