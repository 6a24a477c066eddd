"""The reference decoder of /v1/rerank bodies: msgspec with app/api/contract.py's Structs, then
the checks types cannot make and the Docs the runner takes.

The engine's decoder (crates/engine/src/contract.rs) must accept and refuse exactly what
this does, naming the same field with the same problem (tests/engine/test_contract_engine.py).
"""
from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from typing import Any

import msgspec

from app.api.contract import RerankRequest
from app.banlist import canon
from app.errors import FieldError, Malformed, TooLarge
from tests.reference.pipeline import Doc

U64_MAX = 2**64 - 1

_DECODER = msgspec.json.Decoder(RerankRequest)
_AT = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)


def decode(body: bytes) -> RerankRequest:
    """Decode and type-check a body; FieldError names the field (`documents[3].score`).

    A key an object gives twice is a 400 naming it (CONTRACT.md), unless msgspec refuses
    something before it: the body up to that key is decoded alone, and any refusal but
    its end (truncated) is the one named."""
    repeat = first_repeated_key(body)
    if repeat is None:
        return _decode(body)
    at, path = repeat
    try:
        _decode(body[:at])
    except Malformed as exc:
        if exc.problem != "not valid JSON: Input data was truncated":
            raise
    raise Malformed(path, "duplicate key")


_WS = re.compile(rb"[ \t\n\r]*")
_STRING = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\.)*"')
_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")


class _Open:
    """A container the scan is in: its path, and its keys so far (an object) or the index
    of its element (an array)."""

    def __init__(self, path: str, keys: set[str] | None) -> None:
        self.path, self.keys, self.index = path, keys, 0


def first_repeated_key(body: bytes) -> tuple[int, str] | None:
    """(offset of its opening quote, JSON path) of the first key in the body that its
    object gave before; None if there is none before the body ends or stops being JSON.
    Keys compare as decoded (`"a"` and `"\\u0061"` are one key)."""
    try:  # most bodies are JSON without a repeat: the C parser says so at once
        json.loads(body, object_pairs_hook=_no_repeat)
        return None
    except (_Repeat, ValueError, RecursionError):
        return _scan(body)


class _Repeat(Exception):
    pass


def _no_repeat(pairs: list[tuple[str, Any]]) -> None:
    if len({k for k, _ in pairs}) != len(pairs):
        raise _Repeat


def _scan(body: bytes) -> tuple[int, str] | None:
    """`first_repeated_key` by a scan with a stack, not a recursion: bodies nest thousands
    deep."""
    stack: list[_Open] = []
    path, pos, state = "", 0, "value"
    while True:
        pos = _WS.match(body, pos).end()  # type: ignore[union-attr]
        c = body[pos:pos + 1]
        if state == "value":
            if c in (b"{", b"["):
                stack.append(_Open(path, set() if c == b"{" else None))
                pos, state = pos + 1, "first"
                continue
            m = (_STRING if c == b'"' else _SCALAR).match(body, pos)
            if m is None:
                return None
            pos, state = m.end(), "after"
        elif state == "first":  # just inside a container: empty, or its first member
            top = stack[-1]
            if c == (b"}" if top.keys is not None else b"]"):
                stack.pop()
                pos, state = pos + 1, "after"
            elif top.keys is not None:
                state = "key"
            else:
                path, state = f"{top.path}[0]", "value"
        elif state == "key":
            top = stack[-1]
            m = _STRING.match(body, pos)
            if m is None or top.keys is None:
                return None
            try:
                key = json.loads(m.group())
            except ValueError:
                return None
            path = f"{top.path}.{key}".lstrip(".")
            if key in top.keys:
                return pos, path
            top.keys.add(key)
            pos = _WS.match(body, m.end()).end()  # type: ignore[union-attr]
            if body[pos:pos + 1] != b":":
                return None
            pos, state = pos + 1, "value"
        else:  # after a value: the next member, or the container's end
            if not stack:
                return None
            top = stack[-1]
            if c == b",":
                pos += 1
                if top.keys is not None:
                    state = "key"
                else:
                    top.index += 1
                    path, state = f"{top.path}[{top.index}]", "value"
            elif c == (b"}" if top.keys is not None else b"]"):
                stack.pop()
                pos += 1
            else:
                return None


def _decode(body: bytes) -> RerankRequest:
    try:
        return _DECODER.decode(body)
    except msgspec.ValidationError as exc:
        m = _AT.match(str(exc))
        path = (m["path"] or "").lstrip(".") if m else ""
        problem = m["problem"] if m else str(exc)
        unknown = re.match(r"Object contains unknown field `(.+)`", problem)
        if unknown:
            path = f"{path}.{unknown[1]}" if path else unknown[1]
            problem = "unknown field"
        missing = re.match(r"Object missing required field `(.+)`", problem)
        if missing:
            path = f"{path}.{missing[1]}" if path else missing[1]
            problem = "required field is missing"
        if "[...]" in path:  # msgspec does not name a map key (or any step of some paths)
            path = _locate(body, path, problem)
        raise FieldError(path or "body", problem) from None
    except msgspec.DecodeError as exc:
        raise Malformed("body", f"not valid JSON: {exc}") from None
    except RecursionError:  # msgspec's guard: arrays and objects nested past Python's limit
        raise Malformed("body", "JSON nested too deeply (arrays and objects within each "
                        "other, about a thousand levels)") from None


_JSON_TYPE = {str: "str", int: "int", float: "float", bool: "bool", list: "array",
              dict: "object", type(None): "null"}


LOCATE_MAX_BYTES = 1 << 20  # a refused body bigger than this keeps msgspec's path


def _locate(body: bytes, path: str, problem: str) -> str:
    """msgspec's path with its `[...]` replaced by the key or index it means, where we can
    find it; the path as msgspec gave it otherwise. Only runs on a refused body, and only
    on one of at most LOCATE_MAX_BYTES: it parses the body again."""
    if len(body) > LOCATE_MAX_BYTES:
        return path
    try:
        # The standard parser keeps what msgspec refuses to hold (1e400 is inf, huge ints
        # stay ints), so the offending value is there to be found.
        root = json.loads(body)
        if problem.startswith("Number out of range"):  # msgspec names no step of the path
            return _first_out_of_range(root) or path
        return _name_map_key(root, path, problem)
    except (ValueError, RecursionError, LookupError, TypeError):
        return path


def _out_of_range(node: Any) -> bool:
    """A number no float holds (msgspec keeps ints of any size where the type is Any)."""
    if isinstance(node, float):
        return not math.isfinite(node)
    return isinstance(node, int) and not isinstance(node, bool) and abs(node) > sys.float_info.max


def _first_out_of_range(root: Any) -> str | None:
    """The path of the first out-of-range number in document order; the path is built only
    for the one found (a few MiB of JSON hold a million nodes)."""
    top = _children(root)
    if top is None:
        return None
    keys: list[str | int] = []
    levels = [top]
    while levels:
        for key, value in levels[-1]:
            if _out_of_range(value):
                return "".join(f"[{k}]" if isinstance(k, int) else f".{k}"
                               for k in (*keys, key)).lstrip(".")
            below = _children(value)
            if below is not None:
                keys.append(key)
                levels.append(below)
                break
        else:
            levels.pop()
            if keys:
                keys.pop()
    return None


def _children(node: Any) -> Iterator[tuple[str | int, Any]] | None:
    if isinstance(node, dict):
        return iter(node.items())
    if isinstance(node, list):
        return iter(enumerate(node))
    return None


def _name_map_key(root: Any, path: str, problem: str) -> str:
    """Replace a trailing `[...]` with the first key of that map whose value has the bad type."""
    if not path.endswith("[...]"):
        return path
    got = re.search(r"got `(\w+)`", problem)
    node = root
    for step in re.findall(r"[^.\[\]]+|\[\d+\]", path.removesuffix("[...]")):
        node = node[int(step[1:-1])] if step.startswith("[") else node[step]
    bound = re.search(r"Expected `\w+` (<=|>=) (\S+)", problem)
    if isinstance(node, dict):
        for key, value in node.items():
            if got and _JSON_TYPE.get(type(value)) == got[1]:
                return f"{path.removesuffix('[...]')}.{key}"
            if bound and isinstance(value, int | float) and not isinstance(value, bool) and (
                    value > float(bound[2]) if bound[1] == "<=" else value < float(bound[2])):
                return f"{path.removesuffix('[...]')}.{key}"
    return path


_ALPHA_2 = re.compile(r"[A-Za-z]{2}")


def to_docs(req: RerankRequest, max_documents: int, max_text_chars: int) -> list[Doc]:
    """Check what types cannot (the region, limits, unique ids) and build Docs, canonical
    URLs resolved; the first problem in document order is the one raised."""
    region = req.query.region
    if region is not None and not _ALPHA_2.fullmatch(region):
        # CONTRACT.md: an ISO 3166-1 alpha-2 code in any case; no other spelling is guessed
        raise FieldError("query.region", f"{region!r} is not an ISO 3166-1 alpha-2 code "
                         "(two letters, such as RU, in any case)")
    if len(req.documents) > max_documents:
        raise TooLarge("documents", f"{len(req.documents)} documents, over the limit "
                       f"of {max_documents}")
    first: dict[str, int] = {}
    docs: list[Doc] = []
    for i, d in enumerate(req.documents):
        if d.id in first:
            raise FieldError(f"documents[{i}].id",
                             f"duplicate id {d.id!r} (first at documents[{first[d.id]}])")
        first[d.id] = i
        if d.text is not None and len(d.text) > max_text_chars:
            raise TooLarge(f"documents[{i}].text",
                           f"{len(d.text)} characters, over the limit of {max_text_chars}")
        if d.minhash is not None and max(d.minhash.values) > U64_MAX:
            at = next(n for n, v in enumerate(d.minhash.values) if v > U64_MAX)
            raise FieldError(f"documents[{i}].minhash.values[{at}]",
                             "must be an unsigned 64-bit integer (<= 2**64 - 1)")
        for j, blocked in enumerate(d.blocked_regions):  # held to query.region's rule
            if not _ALPHA_2.fullmatch(blocked):
                raise FieldError(f"documents[{i}].blocked_regions[{j}]",
                                 f"{blocked!r} is not an ISO 3166-1 alpha-2 code (two "
                                 "letters, such as RU, in any case)")
        try:
            canonical, host = canon.canonicalize_with_host(d.url)
        except canon.InvalidURL:
            # No browser could open it: not bad input, but no host either (a canonical
            # host is never ''), so the banlist rule removes the document, naming why.
            canonical = host = ""
        # Factors need no check here: the Score type already bounds them (finite, |x| <= 1e15).
        docs.append(Doc(
            id=d.id, url=d.url, score=d.score, original_score=d.score, canonical=canonical,
            host=host, original_position=i + 1, factors=d.factors, spam_score=d.spam_score,
            adult_score=d.adult_score, domain_age_days=d.domain_age_days, is_ad=d.is_ad,
            topics=d.topics, blocked_regions=frozenset(r.upper() for r in d.blocked_regions),
            text=d.text, signature=d.minhash, attributes=d.attributes))
    return docs
