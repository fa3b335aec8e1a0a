"""The library's record-keeping themes: a stock of items and the scores of games and classes
(see :mod:`.library`).

Each function is kept as source text and is correct; the generator injects bugs into copies.
Some call functions of the ``numbers`` theme (:mod:`.themes_basic`).
"""

from __future__ import annotations

import random

from turnrl.envs.swe.entry import ITEMS, Args, LibraryFunction, Theme, either, stock, with_optional

THEMES = (
    Theme("inventory", ("inventory", "stock", "warehouse", "storeroom"),
          "Stock keeping: a stock maps item names to how many are left."),
    Theme("scoring", ("scoring", "grades", "results", "league"),
          "Scores of classes and league matches."),
)


def _change(rng: random.Random) -> Args:
    return (stock(rng), rng.choice(ITEMS), either(rng, [0, 1], lambda: rng.randint(0, 40)))


def _low_stock(rng: random.Random) -> Args:
    return with_optional(rng, (stock(rng, most=5, high=12),), (rng.randint(0, 10),))


def _reorder(rng: random.Random) -> Args:
    count = either(rng, [0, 19, 20, 14], lambda: rng.randint(0, 30))
    return with_optional(rng, (count,), (rng.randint(0, 30), rng.randint(1, 8)))


def _packs(rng: random.Random) -> Args:
    return with_optional(rng, (stock(rng, most=4, high=25),), (rng.randint(0, 30),))


def _order_cost(rng: random.Random) -> Args:
    required = (stock(rng, most=4, high=25), either(rng, [0, 450], lambda: rng.randint(1, 900)))
    return with_optional(rng, required, (rng.randint(0, 30),))


def _score(rng: random.Random) -> Args:
    return (either(rng, [0, 59, 60, 69, 70, 79, 80, 89, 90, 100], lambda: rng.randint(0, 100),
                   edge_share=0.6),)


def _scores(rng: random.Random) -> Args:
    return ([rng.randint(40, 100) for _ in range(rng.randint(0, 5))],)


def _goals(rng: random.Random) -> Args:
    return (rng.randint(0, 4), rng.randint(0, 4))


def _results(rng: random.Random) -> Args:
    return ([_goals(rng) for _ in range(rng.randint(0, 5))],)


def _ranked(rng: random.Random) -> Args:
    return (either(rng, [[], [50, 80, 50, 20], [7]], lambda: [rng.randint(0, 9) for _ in
                                                             range(rng.randint(0, 5))]),)


INVENTORY = (
    LibraryFunction("restock", "inventory", "adding deliveries to the stock", '''\
def restock(stock: dict, item: str, amount: int) -> dict:
    """Return a copy of ``stock`` (item name to count) with ``amount`` more of ``item``;
    an item that was not in stock yet is added at the end. ``stock`` itself is unchanged.

    ``restock({"nails": 3}, "nails", 5)`` is ``{"nails": 8}``.
    """
    updated = dict(stock)
    updated[item] = updated.get(item, 0) + amount
    return updated
''', _change),
    LibraryFunction("remove_items", "inventory", "taking items out of the stock", '''\
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
''', _change),
    LibraryFunction("low_stock", "inventory", "listing the items that run low", '''\
def low_stock(stock: dict, threshold: int = 5) -> list:
    """Return the names of the items with fewer than ``threshold`` left, in alphabetical
    order.

    ``low_stock({"nails": 3, "screws": 40})`` is ``["nails"]``.
    """
    names = []
    for name, count in stock.items():
        if count < threshold:
            names.append(name)
    return sorted(names)
''', _low_stock),
    LibraryFunction("reorder_quantity", "inventory", "working out how many packs to reorder",
                    '''\
def reorder_quantity(count: int, target: int = 20, pack: int = 6) -> int:
    """Return how many packs of ``pack`` items to order to bring ``count`` up to at least
    ``target``; none when the count already reaches the target.

    ``reorder_quantity(5)`` is ``3``: 15 items are missing, and two packs of 6 are too few.
    """
    if count >= target:
        return 0
    return ceil_div(target - count, pack)
''', _reorder),
    LibraryFunction("packs_needed", "inventory", "planning a restocking order", '''\
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
''', _packs),
    LibraryFunction("order_cost", "inventory", "pricing a restocking order", '''\
def order_cost(stock: dict, pack_price: int, target: int = 20) -> int:
    """Return the cost in cents of the restocking order for ``stock`` (see
    ``packs_needed``): the number of packs to order times ``pack_price``.

    ``order_cost({"nails": 5, "glue": 30}, 450)`` is ``1350``.
    """
    total_packs = 0
    for packs in packs_needed(stock, target).values():
        total_packs += packs
    return total_packs * pack_price
''', _order_cost),
)

SCORING = (
    LibraryFunction("letter_grade", "scoring", "turning scores into letter grades", '''\
def letter_grade(score: int) -> str:
    """Return the letter grade of a score out of 100: 90 and above is "A", 80 to 89 "B",
    70 to 79 "C", 60 to 69 "D", and anything lower "F".
    """
    if score >= 90:
        return "A"
    elif score >= 80:
        return "B"
    elif score >= 70:
        return "C"
    elif score >= 60:
        return "D"
    return "F"
''', _score),
    LibraryFunction("class_grade", "scoring", "grading a whole class", '''\
def class_grade(scores: list) -> str:
    """Return the letter grade (see ``letter_grade``) of the average of ``scores``, rounded
    down; an empty class averages 0.

    ``class_grade([85, 90, 96])`` is ``"A"``.
    """
    return letter_grade(average(scores))
''', _scores),
    LibraryFunction("match_points", "scoring", "scoring league matches", '''\
def match_points(goals_for: int, goals_against: int) -> int:
    """Return the league points a team earns from one match: 3 for a win, 1 for a draw and
    0 for a loss.

    ``match_points(2, 1)`` is ``3``.
    """
    if goals_for > goals_against:
        return 3
    if goals_for == goals_against:
        return 1
    return 0
''', _goals),
    LibraryFunction("table_points", "scoring", "adding up a team's league points", '''\
def table_points(results: list) -> int:
    """Return a team's league points over its ``results``, a list of ``(goals_for,
    goals_against)`` pairs, one per match (see ``match_points``).

    ``table_points([(2, 1), (0, 0), (1, 3)])`` is ``4``.
    """
    total = 0
    for goals_for, goals_against in results:
        total += match_points(goals_for, goals_against)
    return total
''', _results),
    LibraryFunction("rank", "scoring", "working out players' places from their scores", '''\
def rank(scores: list) -> list:
    """Return the rank of each score, ``1`` for the highest; equal scores share a rank and
    the ranks after them are skipped, so ``rank([50, 80, 50, 20])`` is ``[2, 1, 2, 4]``.
    """
    ranks = []
    for score in scores:
        higher = 0
        for other in scores:
            if other > score:
                higher += 1
        ranks.append(higher + 1)
    return ranks
''', _ranked),
)

FUNCTIONS = INVENTORY + SCORING
