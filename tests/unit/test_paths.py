from __future__ import annotations

from govsync import paths


def test_split_and_text() -> None:
    assert paths.split("a.b.0.c") == ("a", "b", 0, "c")
    assert paths.split("") == ()
    assert paths.text(("rules", 0, "name")) == "rules[0].name"


def test_get_and_has_never_raise() -> None:
    data = {"a": {"b": [1, {"c": None}]}}
    assert paths.get(data, ("a", "b", 1, "c")) is None
    assert paths.has(data, ("a", "b", 1, "c"))
    assert not paths.has(data, ("a", "b", 5))
    assert not paths.has(data, ("a", "b", "x"))
    assert not paths.has("text", ("a",))
    assert paths.get(data, ("a", "x"), default="d") == "d"


def test_replace_copies_the_way_down_and_leaves_the_input_alone() -> None:
    data = {"a": {"b": [1, 2]}, "other": {"x": 1}}
    out = paths.replace(data, ("a", "b", 1), 9)
    assert out == {"a": {"b": [1, 9]}, "other": {"x": 1}}
    assert data == {"a": {"b": [1, 2]}, "other": {"x": 1}}
    assert out["other"] is data["other"]  # untouched branches are shared


def test_under() -> None:
    assert paths.under(("a", "b"), ("a",))
    assert paths.under(("a",), ("a",))
    assert not paths.under(("ab",), ("a",))
