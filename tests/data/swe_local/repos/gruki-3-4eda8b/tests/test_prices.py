"""Tests of gruki.prices."""

from gruki.prices import bulk_price, invoice_total, split_bill


def test_bulk_price_1():
    assert bulk_price(5516, 3, 2) == 11032


def test_bulk_price_2():
    assert bulk_price(8335, 11) == 66680


def test_bulk_price_3():
    assert bulk_price(2451, 7) == 12255


def test_split_bill_1():
    assert split_bill(7, 3) == [3, 2, 2]


def test_split_bill_2():
    assert split_bill(0, 0) == []


def test_split_bill_3():
    assert split_bill(1000, 2) == [500, 500]


def test_invoice_total_1():
    assert invoice_total([9056, 5975, 1098], 10) == 17419


def test_invoice_total_2():
    assert invoice_total([617, 1999], 10) == 2825


def test_invoice_total_3():
    assert invoice_total([4726], 25) == 4253
