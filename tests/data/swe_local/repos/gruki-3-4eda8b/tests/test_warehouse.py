"""Tests of gruki.warehouse."""

from gruki.warehouse import order_cost, packs_needed, remove_items, reorder_quantity, restock


def test_restock_1():
    assert restock({'bolts': 3}, 'glue', 1) == {'bolts': 3, 'glue': 1}


def test_restock_2():
    assert restock({}, 'washers', 1) == {'washers': 1}


def test_restock_3():
    assert restock({'bolts': 0, 'washers': 15, 'tape': 14}, 'tape', 10) == {'bolts': 0, 'washers': 15, 'tape': 24}


def test_remove_items_1():
    assert remove_items({}, 'washers', 1) == {}


def test_remove_items_2():
    assert remove_items({}, 'nails', 13) == {}


def test_remove_items_3():
    assert remove_items({}, 'screws', 40) == {}


def test_order_cost_1():
    assert order_cost({'nails': 21, 'washers': 15}, 572, 13) == 0


def test_order_cost_2():
    assert order_cost({'tape': 7, 'glue': 18}, 331, 27) == 1986


def test_order_cost_3():
    assert order_cost({}, 588) == 0


def test_packs_needed_1():
    assert packs_needed({'glue': 16}) == {'glue': 1}


def test_packs_needed_2():
    assert packs_needed({'screws': 9, 'glue': 0, 'hinges': 23}, 28) == {'screws': 4, 'glue': 5, 'hinges': 1}


def test_packs_needed_3():
    assert packs_needed({'nails': 18, 'screws': 6}) == {'nails': 1, 'screws': 3}


def test_reorder_quantity_1():
    assert reorder_quantity(14, 7) == 0


def test_reorder_quantity_2():
    assert reorder_quantity(7, 12) == 1


def test_reorder_quantity_3():
    assert reorder_quantity(14, 18) == 1
