"""Tests of gruki.arith."""

from gruki.arith import ceil_div, clamp, digit_sum, round_to


def test_ceil_div_1():
    assert ceil_div(0, 8) == 0


def test_ceil_div_2():
    assert ceil_div(0, 9) == 0


def test_ceil_div_3():
    assert ceil_div(46, 4) == 12


def test_clamp_1():
    assert clamp(8, 8, 15) == 8


def test_clamp_2():
    assert clamp(-23, -1, 5) == -1


def test_clamp_3():
    assert clamp(20, 9, 17) == 17


def test_round_to_1():
    assert round_to(-55, 10) == -50


def test_round_to_2():
    assert round_to(7) == 5


def test_round_to_3():
    assert round_to(-17) == -15


def test_digit_sum_1():
    assert digit_sum(3214) == 10


def test_digit_sum_2():
    assert digit_sum(-57894) == 33


def test_digit_sum_3():
    assert digit_sum(9) == 9
