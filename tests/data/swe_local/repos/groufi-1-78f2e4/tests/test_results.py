"""Tests of groufi.results."""

from groufi.results import match_points, rank, table_points


def test_table_points_1():
    assert table_points([(1, 2), (3, 0)]) == 3


def test_table_points_2():
    assert table_points([(3, 0)]) == 3


def test_table_points_3():
    assert table_points([(0, 3), (3, 2), (3, 4), (1, 4)]) == 3


def test_match_points_1():
    assert match_points(4, 3) == 3


def test_match_points_2():
    assert match_points(4, 0) == 3


def test_match_points_3():
    assert match_points(0, 4) == 0


def test_rank_1():
    assert rank([1, 7, 3, 4, 0]) == [4, 1, 3, 2, 5]


def test_rank_2():
    assert rank([7]) == [1]


def test_rank_3():
    assert rank([1, 1]) == [1, 1]
