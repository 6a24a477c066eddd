"""The filter of the bulk actions (app/banlist/selection.py): its fields as given, refused by
name, and the index's pick (BanIndex.select, in Rust) against a plain Python filter."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.banlist.index import BanIndex
from app.banlist.model import SCOPES, Entry, parse_iso
from app.banlist.selection import Selection
from app.errors import FieldError

NOW = parse_iso("2026-06-01T00:00:00Z")


def test_fields_are_parsed_and_echoed():
    sel = Selection.of({"actor": " alice ", "reason_contains": "Campaign 7",
                        "value_suffix": ".Camp.Example/Promo", "scope": "host",
                        "created_after": "2026-05-01",
                        "created_before": "2026-05-02T12:00:00+02:00",
                        "expires_before": "2026-07-01T00:00:00Z"}, NOW, "filter")
    assert sel.actor == "alice" and sel.value_suffix == ".camp.example/Promo"
    assert sel.as_dict() == {"actor": "alice", "reason_contains": "Campaign 7",
                             "scope": "host", "value_suffix": ".camp.example/Promo",
                             "created_before": "2026-05-02T10:00:00.000Z",
                             "created_after": "2026-05-01T00:00:00.000Z",
                             "expires_before": "2026-07-01T00:00:00.000Z"}
    assert not sel.empty() and Selection.of({}, NOW, "filter").empty()
    assert Selection.of({"actor": None}, NOW, "filter").empty()


@pytest.mark.parametrize(("fields", "field", "problem"), [
    ({"actor": "  "}, "filter.actor", "empty"),
    ({"scope": "site"}, "filter.scope", "unknown scope 'site'"),
    ({"created_before": "yesterday"}, "filter.created_before", "not an ISO 8601 time"),
    ({"created_after": "7d"}, "filter.created_after", "not an ISO 8601 time"),
    ({"expires_before": "2026-03-01T12:00:00"}, "filter.expires_before", "with an offset"),
    ({"created_after": "2026-05-02", "created_before": "2026-05-01"}, "filter.created_before",
     "is not after created_after"),
    ({"reason_contains": "x" * 1001}, "filter.reason_contains", "at most 1000"),
])
def test_a_bad_field_is_refused_by_name(fields, field, problem):
    with pytest.raises(FieldError) as refused:
        Selection.of(fields, NOW, "filter")
    assert refused.value.field == field and problem in refused.value.problem


# --- the index's pick against a plain filter ---------------------------------------------

IDS = st.one_of(st.integers(1, 60).map(str), st.sampled_from(("a1", "b2", "zz", "legacy")))
VALUES = ("a.camp.example", "b.camp.example", "camp.example", "x.other.example",
          "shop.example/promo", "shop.example/Promo")
REASONS = ("Campaign 7 spam", "campaign 7", "CAMPAIGN 8", "doorways", "court order")
ACTORS = ("alice", "bob", "system")
TIMES = st.sampled_from((NOW - 86400 * 30, NOW - 86400, NOW - 3600, NOW, NOW + 3600,
                         NOW + 86400 * 30))


@st.composite
def entries(draw):
    ids = draw(st.lists(IDS, max_size=40, unique=True))
    return [Entry(i, draw(st.sampled_from(SCOPES)), draw(st.sampled_from(VALUES)),
                  draw(st.sampled_from(REASONS)), draw(st.sampled_from(ACTORS)),
                  draw(TIMES), draw(st.one_of(st.none(), TIMES)), frozenset())
            for i in ids]


selections = st.builds(
    Selection, actor=st.none() | st.sampled_from(ACTORS),
    reason_contains=st.none() | st.sampled_from(("campaign 7", "CAMPAIGN", "order", "x")),
    scope=st.none() | st.sampled_from(SCOPES),
    value_suffix=st.none() | st.sampled_from((".camp.example", "camp.example", "/promo", "e")),
    created_before=st.none() | TIMES, created_after=st.none() | TIMES,
    expires_before=st.none() | TIMES)


def picks(sel: Selection, e: Entry) -> bool:
    """The filter as docs/banlist.md words it, written again by hand."""
    return all((
        e.expires_at is None or e.expires_at > NOW,
        sel.actor is None or e.actor == sel.actor,
        sel.reason_contains is None or sel.reason_contains.lower() in e.reason.lower(),
        sel.scope is None or e.scope == sel.scope,
        sel.value_suffix is None or e.value.endswith(sel.value_suffix),
        sel.created_before is None or e.created_at < sel.created_before,
        sel.created_after is None or e.created_at >= sel.created_after,
        sel.expires_before is None or (e.expires_at is not None
                                       and e.expires_at < sel.expires_before)))


def order(entry_id: str) -> tuple[int, int, str]:
    """The entries list's order: numbers by number, then other ids by string."""
    return (0, int(entry_id), "") if entry_id.isdigit() else (1, 0, entry_id)


@settings(max_examples=150, deadline=None)
@given(entries(), selections, st.integers(1, 7))
def test_the_index_pages_exactly_what_a_plain_filter_keeps(held, sel, limit):
    index = BanIndex(held)
    want = sorted((e.id for e in held if picks(sel, e)), key=order)
    got, after = [], None
    while True:
        page, more, total = sel.page(index, after, limit, NOW)
        assert total == len(want)
        got += [e.id for e in page]
        if not more:
            break
        assert len(page) == limit
        after = page[-1].id
    assert got == want
    assert [e.id for e in sel.entries(index, NOW)] == want
