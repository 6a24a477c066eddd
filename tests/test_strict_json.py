"""app/strict_json.py on random JSON whose objects may give a key twice at any depth: it
finds the first repeat in the text's order (known here from how the JSON was drawn), or
decodes as json.loads does."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import strict_json


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


def decoded(k: str) -> str:
    return "a" if k == ESCAPED_A else k


def first_repeat(v, path: str = "") -> str | None:
    """The path of the first key, in the order written, that its object gave before: keys
    are compared as decoded, an object's members are written before the next key."""
    if isinstance(v, Members):
        seen: set[str] = set()
        for k, x in v:
            here = f"{path}.{decoded(k)}" if path else decoded(k)
            if decoded(k) in seen:
                return here
            seen.add(decoded(k))
            found = first_repeat(x, here)
            if found is not None:
                return found
    elif isinstance(v, list):
        for i, x in enumerate(v):
            found = first_repeat(x, f"{path}[{i}]")
            if found is not None:
                return found
    return None


@settings(max_examples=250, deadline=None)
@given(st.lists(st.tuples(keys, values), max_size=4))
def test_the_first_repeated_key_is_found(members):
    text = write(Members(members))
    want = first_repeat(Members(members))
    if want is None:
        assert strict_json.loads(text) == json.loads(text)
        return
    with pytest.raises(strict_json.RepeatedKey) as found:
        strict_json.loads(text)
    assert found.value.path == want, text


@pytest.mark.parametrize("text", ['{"x": NaN}', '[Infinity]', '{"a": -Infinity}'])
def test_nan_and_infinity_are_not_json(text):
    with pytest.raises(json.JSONDecodeError, match="is not JSON"):
        strict_json.loads(text)
