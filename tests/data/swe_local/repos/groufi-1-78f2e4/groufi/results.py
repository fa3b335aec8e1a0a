"""Scores of classes and league matches."""


def table_points(results: list) -> int:
    """Return a team's league points over its ``results``, a list of ``(goals_for,
    goals_against)`` pairs, one per match (see ``match_points``).

    ``table_points([(2, 1), (0, 0), (1, 3)])`` is ``4``.
    """
    total = 0
    for goals_for, goals_against in results:
        total += match_points(goals_for, goals_against)
    return total


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
