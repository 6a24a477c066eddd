"""JSON read strictly: an object that gives a key twice is refused, never "the last one
wins" (CONTRACT.md, strictness of the JSON bodies). The admin routes read their bodies
with it (app/api/strict.py), and so does a banlist import's every NDJSON line;
`/v1/rerank` is the engine's (crates/engine/src/contract/).
"""
from __future__ import annotations

import json
from typing import Any


class RepeatedKey(ValueError):
    """A key its object gives twice; `path` names it as the API names fields
    (`documents[3].url`, `scope`)."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path}: duplicate key")
        self.path = path


def loads(text: str | bytes) -> Any:
    """`json.loads` of JSON proper: a repeated key is refused with RepeatedKey (the first
    in the text); `NaN`, `Infinity` and nesting past Python's recursion limit with
    json.JSONDecodeError, as any other syntax."""
    doc = (text.decode(json.detect_encoding(text), "surrogatepass") if isinstance(text, bytes)
           else text)  # as json.loads reads bytes

    def constant(name: str) -> Any:
        raise json.JSONDecodeError(f"{name} is not JSON", doc, doc.find(name))

    try:
        try:
            return json.loads(doc, object_pairs_hook=_unique, parse_constant=constant)
        except _Repeated:
            pass
        # Only for a refusal: read again keeping every member, to name the first repeat.
        path = _first_repeat(json.loads(doc, object_pairs_hook=_Members), "")
    except RecursionError:  # json's guard against deep nesting: refused as bad syntax
        raise json.JSONDecodeError("nested too deeply", doc, 0) from None
    raise RepeatedKey(path or "body")


class _Repeated(Exception):
    """Some object repeats a key (which one is found afterwards)."""


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Repeated
    return out


class _Members(list):  # type: ignore[type-arg]
    """An object's members, as given."""


def _first_repeat(node: Any, path: str) -> str | None:
    """The path of the first key (in the text's order) that its object gave before."""
    if isinstance(node, _Members):
        seen: set[str] = set()
        for key, value in node:
            here = f"{path}.{key}" if path else key
            if key in seen:
                return here
            seen.add(key)
            found = _first_repeat(value, here)
            if found is not None:
                return found
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found = _first_repeat(value, f"{path}[{i}]")
            if found is not None:
                return found
    return None
