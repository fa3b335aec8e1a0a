"""Tests of zapusto.lists."""

from zapusto.lists import chunk, moving_sum


def test_moving_sum_1():
    assert moving_sum([1, 9, -2, 0, -4, -3]) == [8, 7, -6, -7]


def test_moving_sum_2():
    assert moving_sum([-7, -2, -7, 11], 1) == [-7, -2, -7, 11]


def test_moving_sum_3():
    assert moving_sum([17, 12, -1, -5, 8, 13], -1) == []


def test_chunk_1():
    assert chunk([1, 2, 3, 4, 5]) == [[1, 2], [3, 4], [5]]


def test_chunk_2():
    assert chunk([-3]) == [[-3]]


def test_chunk_3():
    assert chunk([-6, 18, -5, -1, 18]) == [[-6, 18], [-5, -1], [18]]
