"""make test hands out test files in collection order (--no-loadscope-reorder), so the order
tests/conftest.py gives them is what keeps the minutes-long files from running last."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from conftest import pytest_collection_modifyitems


def _item(path: str, name: str, slow: bool = False):
    return SimpleNamespace(path=Path(path), name=name,
                           get_closest_marker=lambda m, s=slow: object() if s and m == "slow" else None)


def test_files_with_a_slow_test_come_first_whole_and_in_their_order():
    items = [_item("a.py", "a1"), _item("b.py", "b1"), _item("b.py", "b2", slow=True),
             _item("c.py", "c1"), _item("d.py", "d1", slow=True), _item("d.py", "d2")]
    pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["b1", "b2", "d1", "d2", "a1", "c1"]


def test_no_slow_test_leaves_the_order_alone():
    items = [_item("b.py", "b1"), _item("a.py", "a1"), _item("b.py", "b2")]
    pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["b1", "a1", "b2"]
