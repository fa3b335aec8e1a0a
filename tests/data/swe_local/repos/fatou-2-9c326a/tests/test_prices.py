"""Tests of fatou.prices."""

from fatou.prices import add_tax, apply_discount, receipt_line


def test_apply_discount_1():
    assert apply_discount(4461, 2) == 4372


def test_apply_discount_2():
    assert apply_discount(100, 150) == 0


def test_apply_discount_3():
    assert apply_discount(100, 60) == 40


def test_receipt_line_1():
    assert receipt_line('', 3672, 16) == '          $36.72'


def test_receipt_line_2():
    assert receipt_line('chocolate cake slice', 5595, 14) == 'chocolate... $55.95'


def test_receipt_line_3():
    assert receipt_line('coffee', -8294, 23) == 'coffee          -$82.94'


def test_add_tax_1():
    assert add_tax(9948, 5) == 10445


def test_add_tax_2():
    assert add_tax(2189) == 2627


def test_add_tax_3():
    assert add_tax(1024) == 1229
