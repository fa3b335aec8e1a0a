"""Tests of gruki.timeutil."""

from gruki.timeutil import day_of_year, days_in_month, is_leap_year, week_number, weeks_left


def test_is_leap_year_1():
    assert is_leap_year(2104) == True


def test_is_leap_year_2():
    assert is_leap_year(1852) == True


def test_is_leap_year_3():
    assert is_leap_year(1900) == False


def test_weeks_left_1():
    assert weeks_left(2023, 2, 28) == 44


def test_weeks_left_2():
    assert weeks_left(1878, 1, 5) == 52


def test_weeks_left_3():
    assert weeks_left(2152, 6, 28) == 27


def test_week_number_1():
    assert week_number(1996, 8, 6) == 32


def test_week_number_2():
    assert week_number(1996, 12, 24) == 52


def test_week_number_3():
    assert week_number(2024, 12, 8) == 49


def test_day_of_year_1():
    assert day_of_year(2023, 8, 5) == 217


def test_day_of_year_2():
    assert day_of_year(2257, 1, 27) == 27


def test_day_of_year_3():
    assert day_of_year(2100, 12, 1) == 335


def test_days_in_month_1():
    assert days_in_month(1900, 12) == 31


def test_days_in_month_2():
    assert days_in_month(2023, 12) == 31


def test_days_in_month_3():
    assert days_in_month(1925, 1) == 31
