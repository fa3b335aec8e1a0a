"""Tests of fatou.strings."""

from fatou.strings import initials, pad_left, title_case, truncate


def test_truncate_1():
    assert truncate('o', 4, '~') == 'o'


def test_truncate_2():
    assert truncate('hello world', 12, '~') == 'hello world'


def test_truncate_3():
    assert truncate('stone blue', 9, '...') == 'stone ...'


def test_pad_left_1():
    assert pad_left('76197', 1, ' ') == '76197'


def test_pad_left_2():
    assert pad_left('77167', 4) == '77167'


def test_pad_left_3():
    assert pad_left('11291', 5) == '11291'


def test_title_case_1():
    assert title_case(' a  ') == 'A'


def test_title_case_2():
    assert title_case(' of   apple  tea  ') == 'Of Apple Tea'


def test_title_case_3():
    assert title_case('  and  stone  apple  ') == 'And Stone Apple'


def test_initials_1():
    assert initials('x') == 'X.'


def test_initials_2():
    assert initials('  blue  river  o ') == 'B.R.O.'


def test_initials_3():
    assert initials(' ') == ''
