"""Tests of fatou.calc."""

from fatou.calc import average, digit_sum, percent_of, round_to


def test_percent_of_1():
    assert percent_of(2824, 67) == 1892


def test_percent_of_2():
    assert percent_of(0, 40) == 0


def test_percent_of_3():
    assert percent_of(0, 72) == 0


def test_round_to_1():
    assert round_to(54, 7) == 56


def test_round_to_2():
    assert round_to(-40, 1) == -40


def test_round_to_3():
    assert round_to(-23) == -25


def test_digit_sum_1():
    assert digit_sum(-38017) == 19


def test_digit_sum_2():
    assert digit_sum(87816) == 30


def test_digit_sum_3():
    assert digit_sum(-99854) == 35


def test_average_1():
    assert average([5]) == 5


def test_average_2():
    assert average([11]) == 11


def test_average_3():
    assert average([9]) == 9
