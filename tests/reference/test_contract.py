"""The reference decoder's to_docs: every Doc field comes from its own field of the request."""
from __future__ import annotations

import msgspec
import pytest

from app.api.contract import MinHash
from app.api.errors import status_of
from app.errors import FieldError
from tests.reference import contract
from tests.reference.pipeline import Doc


def _request(*documents: dict) -> contract.RerankRequest:
    return contract.decode(msgspec.json.encode({"documents": list(documents)}))


def test_to_docs_fills_each_field_from_its_own_source():
    # Docs are built positionally (cheaper per document): a reordered Doc must fail here.
    signature = {"values": [1, 2], "shingles": 5, "width": 3, "seed": 7}
    req = _request({"id": "a", "url": "HTTP://Example.COM", "score": 2.5}, {
        "id": "b", "url": "https://b.example/p?q=1", "score": 1.5, "factors": {"link": 0.5},
        "spam_score": 0.25, "adult_score": 0.75, "domain_age_days": 40.0, "is_ad": True,
        "topics": ["news"], "blocked_regions": ["de", "Fr"], "text": "some words",
        "minhash": signature, "attributes": {"k": [1]}})
    a, b = contract.to_docs(req, 10, 100)
    assert msgspec.structs.asdict(a) == msgspec.structs.asdict(Doc(
        id="a", url="HTTP://Example.COM", score=2.5, original_score=2.5,
        canonical="http://example.com/", host="example.com", original_position=1, topics=[]))
    got = msgspec.structs.asdict(b)
    assert got.pop("signature") == MinHash(**signature)
    assert got == {
        "id": "b", "url": "https://b.example/p?q=1", "score": 1.5, "original_score": 1.5,
        "canonical": "https://b.example/p?q=1", "host": "b.example", "original_position": 2,
        "factors": {"link": 0.5}, "spam_score": 0.25, "adult_score": 0.75,
        "domain_age_days": 40.0, "is_ad": True, "topics": ["news"],
        "blocked_regions": frozenset({"DE", "FR"}), "text": "some words",
        "attributes": {"k": [1]}, "annotations": (), "collapsed": (), "given": None}


def test_to_docs_names_the_later_of_two_equal_ids():
    req = _request(*({"id": i, "url": f"http://{n}.example", "score": 1.0}
                     for n, i in enumerate(["a", "b", "c", "b", "a"])))
    with pytest.raises(FieldError) as err:
        contract.to_docs(req, 10, 100)
    assert err.value.field == "documents[3].id"
    assert err.value.problem == "duplicate id 'b' (first at documents[1])"


def test_to_docs_reports_the_first_problem_in_document_order():
    # The duplicate check runs over all ids first (one set), but is reported where the
    # repeat stands: an earlier document's own problem comes first, with its status.
    req = _request({"id": "a", "url": "http://a.example/", "score": 1, "text": "x" * 11},
                   {"id": "b", "url": "http://b.example/", "score": 1},
                   {"id": "b", "url": "http://c.example/", "score": 1})
    with pytest.raises(FieldError) as err:
        contract.to_docs(req, 100, 10)
    assert (err.value.field, status_of(err.value)) == ("documents[0].text", 413)
    req = _request({"id": "a", "url": "http://a.example/", "score": 1},
                   {"id": "a", "url": "http://", "score": 1})
    with pytest.raises(FieldError) as err:
        contract.to_docs(req, 100, 10)
    assert err.value.field == "documents[1].id"
