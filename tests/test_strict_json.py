"""app/strict_json.py against the reference decoder's own scan for a repeated key
(tests/reference/contract.py, which the engine is held to): on random JSON, whose objects
may give a key twice at any depth, both find the same first repeat, or none."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import strict_json
from tests.reference.contract import first_repeated_key


class Members(list):
    """An object, as the (key, value) pairs written."""


ESCAPED_A = "the key a, written as an escape"
keys = st.sampled_from(["a", "b", "\u00e9", 'a"b', ESCAPED_A])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=3))
# An object is its members as written: (key, value) pairs that may repeat a key.
values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=3),
    st.lists(st.tuples(keys, kids), max_size=4).map(Members)), max_leaves=10)


def write(v) -> str:
    if isinstance(v, Members):
        return "{" + ", ".join(f"{write_key(k)}: {write(x)}" for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ",".join(write(x) for x in v) + "]"
    return json.dumps(v)


def write_key(k: str) -> str:
    return '"\\u0061"' if k == ESCAPED_A else json.dumps(k)


@settings(max_examples=250, deadline=None)
@given(st.lists(st.tuples(keys, values), max_size=4))
def test_the_first_repeated_key_is_the_references(members):
    text = write(Members(members))
    want = first_repeated_key(text.encode())
    if want is None:
        assert strict_json.loads(text) == json.loads(text)
        return
    with pytest.raises(strict_json.RepeatedKey) as found:
        strict_json.loads(text)
    assert found.value.path == want[1], text


@pytest.mark.parametrize("text", ['{"x": NaN}', '[Infinity]', '{"a": -Infinity}'])
def test_nan_and_infinity_are_not_json(text):
    with pytest.raises(json.JSONDecodeError, match="is not JSON"):
        strict_json.loads(text)
