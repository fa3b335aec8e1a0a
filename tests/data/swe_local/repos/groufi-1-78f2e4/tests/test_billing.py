"""Tests of groufi.billing."""

from groufi.billing import bulk_price, split_bill


def test_split_bill_1():
    assert split_bill(282, 5) == [57, 57, 56, 56, 56]


def test_split_bill_2():
    assert split_bill(4514, 6) == [753, 753, 752, 752, 752, 752]


def test_split_bill_3():
    assert split_bill(3724, 3) == [1242, 1241, 1241]


def test_bulk_price_1():
    assert bulk_price(9248, 1, 3) == 9248


def test_bulk_price_2():
    assert bulk_price(100, 5, 3) == 400


def test_bulk_price_3():
    assert bulk_price(0, 1) == 0
