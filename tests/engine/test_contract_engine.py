"""The engine's body decoder through Engine.rerank, against Python's json module.

For random pages, valid and with one corruption of each kind, written the many ways a
client may write JSON: a page the contract allows is served with every document's id, URL,
score and attributes as json.loads reads them; any other is refused with a 4xx whose body
names the field and the problem. Never a 5xx, and never a silently altered result: a page
that is served (a corruption the contract allows, such as any value inside `attributes`)
is served with the values json.loads reads from it.
"""
from __future__ import annotations

import json
import math
import random
import re

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context
from iso3166 import countries_by_alpha2

from app._engine import EngineMetrics
from app.config.load import load_bytes
from app.config.spec import with_core

# Examples per test (docs/development.md says how the counts were chosen): 200 of each reach
# as much of the decoder as 300 did; two refusals only the 300 had drawn are pinned below
# (a fraction in an integer field, a key repeated inside an attribute's object).
SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# No rule: the page comes back as it was decoded.
CORE = with_core(load_bytes(b"profiles: {default: {}}"), EngineMetrics()).core


def served(body: bytes, max_documents: int = 1000, max_text_chars: int = 100_000):
    """(status, the response or the error body as JSON values), read as `as_json_reads`
    reads the body: an attribute is echoed as the text it came as, and a number such as
    1e400 (valid JSON, past a double) is read as infinity on both sides, where orjson
    refuses it."""
    status, out, _, _, _ = CORE.rerank(body, now=1.0, max_documents=max_documents,
                                    max_text_chars=max_text_chars)
    return status, json.loads(out, parse_int=_int)


def _int(text: str) -> int | float:
    n = int(text)
    if -2**63 <= n < 2**64:
        return n
    try:
        return float(n)
    except OverflowError:  # past the largest double: what a double parser reads, infinity
        return math.inf if n > 0 else -math.inf


def as_json_reads(body: bytes):
    """The body's documents as json.loads reads them (id, url, score, attributes); an
    integer past 64 bits is carried as the nearest float (CONTRACT: attributes are JSON
    numbers, which a client may read as doubles)."""
    docs = json.loads(body, parse_int=_int)["documents"]
    return [(d["id"], d["url"], float(d["score"]), d.get("attributes", {})) for d in docs]


def check(body: bytes, max_documents: int = 1000, max_text_chars: int = 100_000,
          valid: bool | None = None) -> None:
    """Served with json.loads' values, or refused naming the field; `valid` says which
    one the contract wants when the case knows."""
    status, out = served(body, max_documents, max_text_chars)
    if currently_in_test_context():  # the mix of verdicts, for --hypothesis-show-statistics
        event(f"{status} {re.sub(r'[0-9]+', 'N', str(out.get('field')))[:40]}"
              if status != 200 else "accepted")
    if status == 200:
        assert valid is not False, f"served what the contract refuses: {body[:200]!r}"
        got = [(d["id"], d["url"], d["score"], d["attributes"]) for d in out["documents"]]
        assert sorted(got, key=repr) == sorted(as_json_reads(body), key=repr)
        return
    assert valid is not True, f"refused a valid page: {out}"
    assert status in (400, 413, 422), (status, out)
    assert set(out) == {"error", "field", "problem"} and out["error"] == "invalid_request"
    assert out["problem"] and (out["field"] is None or isinstance(out["field"], str))


# --- writing JSON the many ways a client may -------------------------------------------

def spell_float(x: float, rnd: random.Random) -> str:
    text = repr(x)
    if "inf" in text or "nan" in text:
        return text
    roll = rnd.random()
    if roll < 0.15:
        return f"{x:e}".replace("e", rnd.choice("eE"))
    if roll < 0.25 and x == int(x) and abs(x) < 1e18:
        return str(int(x)) if x or not math.copysign(1, x) < 0 else "-0"
    if roll < 0.3:
        return f"{x:.17g}"
    return text


def spell_str(s: str, rnd: random.Random) -> str:
    text = json.dumps(s, ensure_ascii=rnd.random() < 0.3)
    if rnd.random() < 0.1:
        text = text.replace("/", "\\/")
    return text


class Twice(dict):
    """An object whose key `key` is given again, with `value`, somewhere after its first."""

    def __init__(self, items: dict, key: str, value) -> None:
        super().__init__(items)
        self.key, self.value = key, value


def dump(v, rnd: random.Random) -> str:
    """JSON text of v, randomly spelled."""
    ws = (lambda: rnd.choice(["", "", " ", "\n  "])) if rnd.random() < 0.2 else (lambda: "")
    if v is None:
        return "null"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return spell_float(v, rnd)
    if isinstance(v, str):
        return spell_str(v, rnd)
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, list):
        return "[" + ",".join(ws() + dump(x, rnd) + ws() for x in v) + "]"
    items = list(v.items())
    if isinstance(v, Twice):
        first = next(i for i, (k, _) in enumerate(items) if k == v.key)
        items.insert(rnd.randint(first + 1, len(items)), (v.key, v.value))
    parts = [f"{ws()}{spell_str(k, rnd)}{ws()}:{ws()}{dump(x, rnd)}" for k, x in items]
    return "{" + ",".join(parts) + "}"


class Raw:
    """JSON text put into a body as it is (NaN, 1e400, deep nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text


# --- valid pages ------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=12)
finite = st.floats(allow_nan=False, allow_infinity=False)
ints = st.one_of(st.integers(-2**70, 2**70), st.integers(-10, 10))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), ints, finite, texts),
    lambda kids: st.one_of(st.lists(kids, max_size=4),
                           st.dictionaries(texts, kids, max_size=4)),
    max_leaves=12)
probability = st.floats(0.0, 1.0)
score = st.floats(-1e15, 1e15)
# an assigned ISO 3166-1 code (the iso3166 package's, as the banlist's) in any case
alpha_2 = st.tuples(st.sampled_from(sorted(countries_by_alpha2)),
                    st.lists(st.booleans(), min_size=2, max_size=2)).map(
    lambda t: "".join(c.lower() if low else c for c, low in zip(t[0], t[1], strict=True)))


@st.composite
def documents(draw, i: int):
    doc = {"id": draw(st.one_of(st.just(f"d{i}"), st.text(min_size=1, max_size=8))),
           "url": f"http://h{i}.example/p",
           "score": draw(st.one_of(score, st.integers(-10**15, 10**15)))}
    optional = {
        "factors": st.dictionaries(texts, score, max_size=3),
        "spam_score": probability, "adult_score": probability,
        "domain_age_days": st.one_of(st.none(), st.floats(0, 1e6), st.integers(0, 10**6)),
        "is_ad": st.booleans(), "topics": st.lists(texts, max_size=3),
        "blocked_regions": st.lists(alpha_2, max_size=2),
        "text": st.one_of(st.none(), st.text(max_size=40)),
        "minhash": st.one_of(st.none(), st.fixed_dictionaries({
            "values": st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=4),
            "shingles": st.integers(0, 10**8), "width": st.integers(1, 100),
            "seed": st.integers(0, 2**64 - 1)})),
        "attributes": st.dictionaries(texts, json_values, max_size=4),
    }
    for name in draw(st.lists(st.sampled_from(sorted(optional)), unique=True)):
        doc[name] = draw(optional[name])
    return doc


@st.composite
def pages(draw):
    n = draw(st.integers(0, 6))
    body = {"documents": [draw(documents(i)) for i in range(n)]}
    extra = {
        "request_id": st.one_of(st.none(), st.text(max_size=20)),
        "query": st.fixed_dictionaries({}, optional={
            "text": st.text(max_size=30), "classes": st.lists(st.text(max_size=10), max_size=3),
            "region": st.one_of(st.none(), alpha_2),
            "age_mode": st.sampled_from(["strict", "moderate", "off"])}),
        "unit": st.dictionaries(texts, texts, max_size=3),
        "profile": st.one_of(st.none(), st.text(max_size=10)),
        "depth": st.one_of(st.none(), st.integers(1, 10_000)),
    }
    for name in draw(st.lists(st.sampled_from(sorted(extra)), unique=True)):
        body[name] = draw(extra[name])
    return body


def encode(body, rnd: random.Random) -> bytes:
    return dump(body, rnd).encode("utf-8", "surrogatepass")


def contract_valid(body) -> bool:
    """Within the contract; a page drawn here may break only these: unique ids, a profile
    the config has."""
    ids = [d["id"] for d in body["documents"]]
    return len(set(ids)) == len(ids) and body.get("profile") in (None, "default")


@SETTINGS
@given(pages(), st.randoms(use_true_random=False))
def test_valid_pages_are_served_with_the_values_sent(body, rnd):
    check(encode(body, rnd), valid=contract_valid(body))


# --- one corruption of each kind ----------------------------------------------------------

def places(body) -> list[tuple[list, object]]:
    """Every (container path, value) of the page, for a corruption to pick from."""
    out: list[tuple[list, object]] = []

    def walk(node, path):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in items:
            out.append((path + [k], v))
            if isinstance(v, (dict, list)):
                walk(v, path + [k])
    walk(body, [])
    return out


def put(body, path, value):
    node = body
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


WRONG = [None, True, 1, -3, 2.5, "x", [], [1], {}, {"a": 1}, 10**25]
OUT_OF_RANGE = [
    (["documents", 0, "score"], 1e16), (["documents", 0, "score"], -2e15),
    (["documents", 0, "spam_score"], 1.5), (["documents", 0, "adult_score"], -0.1),
    (["documents", 0, "domain_age_days"], -1), (["documents", 0, "factors"], {"a": 1e300}),
    (["documents", 0, "id"], ""), (["documents", 0, "id"], "x" * 513),
    (["documents", 0, "blocked_regions"], ["x" * 17]),
    (["documents", 0, "blocked_regions"], [""]), (["documents", 0, "blocked_regions"], [" RU"]),
    (["documents", 0, "blocked_regions"], ["RU", "RUS"]), (["query", "region"], ""),
    (["query", "region"], " RU"), (["query", "region"], "RUS"), (["query", "region"], "ＲＵ"),
    (["query", "region"], "ru-RU"), (["query", "region"], "R"), (["query", "region"], "ß"),
    (["query", "region"], "UK"), (["query", "region"], "xx"),
    (["documents", 0, "blocked_regions"], ["RU", "EU"]),
    (["query", "text"], "é" * 4097), (["query", "classes"], ["c" * 65]),
    (["query", "age_mode"], "kids"), (["query", "age_mode"], "Strict'\n"),
    (["depth"], 0), (["depth"], 10_001), (["depth"], -10**30), (["depth"], 10**30),
    (["request_id"], "r" * 257),
    (["documents", 0, "minhash"], {"values": [], "shingles": 1, "width": 1, "seed": 1}),
    (["documents", 0, "minhash"], {"values": [-1], "shingles": 1, "width": 1, "seed": 1}),
    (["documents", 0, "minhash"], {"values": [1, 2**64], "shingles": 1, "width": 1, "seed": 1}),
    (["documents", 0, "minhash"], {"values": [1] * 4097, "shingles": 1, "width": 1, "seed": 1}),
    (["documents", 0, "minhash"], {"values": [1], "shingles": 10**8 + 1, "width": 1, "seed": 1}),
    (["documents", 0, "minhash"], {"values": [1], "shingles": 1, "width": 101, "seed": 1}),
    (["documents", 0, "minhash"], {"values": [1], "shingles": 1, "width": 0, "seed": -1}),
    (["documents", 0, "minhash"], {"values": [1.0], "shingles": 1, "width": 1, "seed": 1}),
    (["documents", 0, "minhash"], {"values": [1], "shingles": 1, "width": 1}),
]
HUGE = ["1e400", "-1e999", "1" + "0" * 400, "-" + "9" * 320 + ".5", "1" + "0" * 5000,
        "123456789012345678901234567890", "1e-400", "-0", "-0.0", "0e999"]


@st.composite
def corrupted(draw):
    body = draw(pages())
    if not body["documents"]:
        body["documents"].append(draw(documents(0)))
    rnd = draw(st.randoms(use_true_random=False))
    kind = draw(st.sampled_from(["wrong type", "out of range", "missing", "unknown", "dup id",
                                 "repeated key", "nan", "huge", "deep", "bad utf-8",
                                 "truncated"]))
    spots = places(body)
    if kind == "wrong type":
        path, _ = draw(st.sampled_from(spots))
        put(body, path, draw(st.sampled_from(WRONG)))
    elif kind == "out of range":
        path, value = draw(st.sampled_from(OUT_OF_RANGE))
        body.setdefault("query", {}) if path[0] == "query" else None
        put(body, path, value)
    elif kind == "missing":
        target = draw(st.sampled_from(["documents", "id", "url", "score"]))
        if target == "documents":
            del body["documents"]
        else:
            body["documents"][-1].pop(target)
    elif kind == "unknown":
        dicts = [body] + [v for _, v in spots if isinstance(v, dict)]
        draw(st.sampled_from(dicts))[draw(st.sampled_from(["spamscore", "x", "Id"]))] = 1
    elif kind == "repeated key":  # in any object: the body, a document, a map, attributes
        objects = [([], body)] + [(p, v) for p, v in spots if isinstance(v, dict) and v]
        path, obj = draw(st.sampled_from(objects))
        key = draw(st.sampled_from(sorted(obj)))
        twice = Twice(obj, key, draw(st.sampled_from([obj[key], None, 1, "again", [2.5]])))
        if path:
            put(body, path, twice)
        else:
            body = twice
    elif kind == "dup id":
        body["documents"].append(dict(body["documents"][0], url="http://dup.example/"))
        rnd.shuffle(body["documents"])
    elif kind in ("nan", "huge"):
        numbers = [p for p, v in spots if isinstance(v, (int, float)) and not isinstance(v, bool)]
        pick = draw(st.sampled_from(numbers or [["documents", 0, "score"]]))
        lits = ["NaN", "Infinity", "-Infinity", "nan"] if kind == "nan" else HUGE
        put(body, pick, Raw(draw(st.sampled_from(lits))))
    elif kind == "deep":
        n = draw(st.one_of(st.integers(1, 800), st.integers(1100, 3000)))
        put(body, ["documents", 0, "attributes"], {"a": Raw("[" * n + "]" * n)})
    data = encode(body, rnd)
    if kind == "bad utf-8":
        quotes = [m.start() for m in re.finditer(rb'"', data)]
        at = draw(st.sampled_from(quotes)) + 1
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[at:]
    elif kind == "truncated":
        data = data[:draw(st.integers(0, len(data) - 1))]
    limits = draw(st.one_of(st.just((1000, 100_000)),
                            st.tuples(st.integers(0, 8), st.integers(0, 40))))
    return data, limits


@SETTINGS
@given(corrupted())
def test_corrupted_pages_are_refused_or_served_unaltered(case):
    data, (max_documents, max_text_chars) = case
    check(data, max_documents, max_text_chars)


@pytest.mark.parametrize("raw", [
    b'{"documents": [{"id": "a", "url": "http://a/", "score": NaN}]}',
    b'{"documents": [{"id": "a", "url": "http://a/", "score": 1e999}]}',
    b'{"unit": {"user_id": "u", "team": 1e400}, "documents": []}',
    b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "factors": {"link": 1,'
    b' "text": -1e999}}]}',
    b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "attributes": {"x": {"y":'
    b' [0, 1e999]}}}]}',
    b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "attributes": {"big": 1'
    + b"0" * 40 + b', "x": 1e400}}]}',
    b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "attributes": {"a": '
    + b"[" * 5000 + b"]" * 5000 + b"}}]}",
    b'{"documents": [', b"", b"[]", b"\xff\xfe", b'{"documents":[],}', b'{"documents":[]} x',
    b'{"documents":[],"depth":01}', b'{"documents":[],"depth":1.}', b'{"documents":[],"d":-}',
    b'{"documents":[],"unit":{"a":"\\x"}}', b'{"documents":[],"unit":{"a":"\\ud800"}}',
    b'{"documents":[],"unit":{"a":"\\ud800\\u0041"}}', b'{"documents":[],"unit":{"a":"\\udc00"}}',
    b'{"documents":[],"unit":{"a":"a\x01"}}', b'{"documents":[],"unit":{"a":"\\u12g4"}}',
    b'{"documents":[{"id":"a","url":"http://a/","score":1,"score":"8"}]}',
    b'{"documents":["\xff"]}', b'{"documents":[],"query":{"text":"\xff"}}',
    b'{"documents":[],"query":{"age_mode":"ki\\u0064s"}}', b'{"documents":[],"depth":tru}',
    b'{"documents":[],"unit":{"a":"b","a":5}}', b'{"documents" [] }', b'{"documents":[1 2]}',
    b'{"documents":[],"unit":{"a":"1",}}', b'{"documents":[],"unit":{1:2}}',
    b'{"documents":[],"text":1e400}',
    b'{"documents":[],"\xff":1}', b'{"documents":[],"query":{"age_mode":"\xff"}}',
    # a repeated key: refused where it stands (an earlier bad value is refused first)
    b'{"documents":[{"id":"a","id":"b","url":"u","score":1,"score":2}],"query":{"text":"x"},'
    b'"query":{}}',
    b'{"documents":[{"id":"a","url":"u","score":"x","score":2}]}',
    b'{"documents":[{"id":"a","url":"u","score":1,"minhash":{"values":[18446744073709551616],'
    b'"shingles":1,"width":1,"seed":1},"minhash":null}]}',
    b'{"documents":[{"id":"a","url":"u","score":1,"minhash":{"seed":18446744073709551616,'
    b'"values":[1,18446744073709551617],"shingles":1,"width":1}}]}',
    b'{"documents":[],"depth":2.5}', b'{"documents":[],"depth":1e1}',
    b'{"documents":[{"id":"a","url":"u","score":1,"attributes":{"x":{"k":1,"k":2}}}]}',
])
def test_the_pinned_bad_bodies(raw):
    check(raw, valid=False)


def test_minus_zero_is_a_score():
    check(b'{"documents":[{"id":"a","url":"u","score":-0}]}', valid=True)
