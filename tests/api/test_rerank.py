"""POST /v1/rerank end to end, and the bad-input corpus: a 4xx naming the field, never a 500."""
from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.app import app_of
from app.api.services import build_services
from tests.conftest import AUTH
from tests.helpers import Ticking


def page(n: int = 5, **extra):
    docs = [{"id": f"d{i}", "url": f"https://h{i % 3}.example.com/p/{i}", "score": 10.0 - i}
            for i in range(n)]
    return {"query": {"text": "q", "region": "RU"}, "documents": docs, **extra}


def test_contract_response_shape(client):
    body = page(4)
    body["documents"][1].update(is_ad=True, attributes={"snippet": "x", "n": [1, 2]})
    r = client.post("/v1/rerank", json=body)
    assert r.status_code == 200
    out = r.json()
    assert set(out) >= {"request_id", "profile", "config_version", "banlist_version",
                        "experiments", "documents", "removed", "fallback", "audit"}
    assert out["profile"] == "default" and out["fallback"] is None
    first = out["documents"][0]
    assert set(first) >= {"id", "url", "position", "original_position", "score",
                          "original_score", "annotations", "collapsed", "attributes"}
    assert [d["position"] for d in out["documents"]] == list(range(1, len(out["documents"]) + 1))
    ad = next(d for d in out["documents"] if d["id"] == "d1")
    assert ad["annotations"] == ["ad"] and ad["attributes"] == {"snippet": "x", "n": [1, 2]}
    assert len(out["request_id"]) == 32


def test_routing_forced_profile_and_banlist(client):
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "host", "value": "h1.example.com", "reason": "malware"})
    body = page(4, request_id="r-1")
    body["query"]["classes"] = ["navigational", "ymyl"]
    out = client.post("/v1/rerank", json=body).json()
    assert out["request_id"] == "r-1" and out["profile"] == "commercial"
    assert out["banlist_version"] == 1
    assert out["removed"] == [{"id": "d1", "rule": "banlist", "phase": "pre-filter",
                               "action": "remove",
                               "reason": "host h1.example.com banned (malware) [entry 1]"}]
    body["profile"] = "default"
    assert client.post("/v1/rerank", json=body).json()["profile"] == "default"


def test_a_url_no_browser_could_open_is_removed_by_the_banlist_rule_not_refused(client):
    # CONTRACT: a URL a browser would open is never bad input; one no browser could open
    # does not fail the page either: the banlist rule removes it, naming the problem.
    body = page(3)
    body["documents"][1]["url"] = "http://"
    body["documents"][2]["url"] = "http:/h2.example.com/p"  # browsers open it
    r = client.post("/v1/rerank", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert [d["id"] for d in out["documents"]] == ["d0", "d2"]
    assert out["removed"] == [{"id": "d1", "rule": "banlist", "phase": "pre-filter",
                               "action": "remove", "reason": "URL cannot be opened: no host"}]


def test_a_host_ban_holds_for_the_spellings_a_browser_resolves_to_it(client):
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "domain", "value": "i❤.ws", "reason": "malware"})
    body = page(4)
    for d, url in zip(body["documents"], ["http://xn--i-7iq.ws/", "\u0001http://i❤.ws/a",
                                          "http:/I❤.ws/b", "https://ok.example/"], strict=True):
        d["url"] = url
    out = client.post("/v1/rerank", json=body).json()
    assert [d["id"] for d in out["documents"]] == ["d3"]
    assert {d["reason"] for d in out["removed"]} == {
        "domain xn--i-7iq.ws banned (malware) [entry 1]"}


def test_an_ip_ban_holds_for_a_special_scheme_followed_by_digits(client):
    # Issue 45: `http:1572395042/` was read as the host `http` with a port, on the admin
    # side as on the page; a browser opens http://93.184.216.34/.
    r = client.post("/v1/banlist/entries", headers=AUTH,
                    json={"scope": "host", "value": "http:1572395042/", "reason": "malware"})
    assert r.status_code == 201 and r.json()["entry"]["value"] == "93.184.216.34"
    body = page(4)
    for d, url in zip(body["documents"], ["http:1572395042/", "http:013556154042/x",
                                          "HTTPS:0x5db8d822", "http://good.example/"],
                      strict=True):
        d["url"] = url
    out = client.post("/v1/rerank", json=body).json()
    assert [d["id"] for d in out["documents"]] == ["d3"]
    assert {d["reason"] for d in out["removed"]} == {
        "host 93.184.216.34 banned (malware) [entry 1]"}


def test_a_url_a_browser_opens_after_three_slashes_is_kept_unless_its_host_is_banned(client):
    # Issue 45: these were removed as having no host; a browser opens good.example.
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "domain", "value": "evil.example", "reason": "malware"})
    body = page(4)
    for d, url in zip(body["documents"], ["http:///good.example/", "http:\\\\\\good.example\\",
                                          "https:////evil.example/", "/good.example/"],
                      strict=True):
        d["url"] = url
    out = client.post("/v1/rerank", json=body).json()
    assert [d["id"] for d in out["documents"]] == ["d0", "d1"]
    assert [(d["id"], d["reason"]) for d in out["removed"]] == [
        ("d2", "domain evil.example banned (malware) [entry 1]"),
        ("d3", "URL cannot be opened: no host")]


def test_a_url_of_any_length_is_served_or_removed_never_refused(client):
    # An 8,227-character search URL, which every browser opens, was a 422 for the whole page
    # (a cap of 8,192), and so was an empty one, which no browser opens: the banlist rule
    # removes that with a record, as any other URL it cannot vouch for.
    body = page(5)
    urls = ["https://a.example/search?q=" + "x" * 8200, "",
            "https://a.example/?q=" + "x" * (2 * 1024 * 1024), "https://b.example/" + "é" * 5000,
            "https://c.example/" + "ж" * 700_000]  # 1.4 MB sent, 4.2 M characters escaped
    for d, url in zip(body["documents"], urls, strict=True):
        d["url"] = url
    r = client.post("/v1/rerank", json=body)
    assert r.status_code == 200, r.text[:300]
    out = r.json()
    assert [d["url"] for d in out["documents"]] == [urls[0], urls[3]]
    assert [(d["id"], d["reason"]) for d in out["removed"]] == [
        ("d1", "URL cannot be opened: empty URL"),
        ("d2", "URL cannot be opened: 2097173 characters long once escaped, over the 2097152 "
               "a browser opens"),
        ("d4", "URL cannot be opened: 4200018 characters long once escaped, over the 2097152 "
               "a browser opens")]


@pytest.mark.parametrize("region", ["RU", "ru", "rU"])
def test_a_region_ban_holds_for_the_region_in_any_case(client, region):
    client.post("/v1/banlist/entries", headers=AUTH, json={
        "scope": "host", "value": "h1.example.com", "reason": "court order", "regions": ["RU"]})
    body = page(3)
    body["query"]["region"] = region
    out = client.post("/v1/rerank", json=body).json()
    assert [d["id"] for d in out["removed"]] == ["d1"]


@pytest.mark.parametrize("region", [" RU", "RU ", "RUS", "ＲＵ", "ru-RU", "R", "ß", "R\n"])
def test_a_region_that_is_not_an_alpha_2_code_is_refused_not_served_unfiltered(client, region):
    # Issue 45: each of these was served with the region's bans skipped (200, unfiltered).
    client.post("/v1/banlist/entries", headers=AUTH, json={
        "scope": "host", "value": "h1.example.com", "reason": "court order", "regions": ["RU"]})
    body = page(3)
    body["query"]["region"] = region
    r = client.post("/v1/rerank", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "query.region"
    assert r.json()["problem"] == (f"{region!r} is not an ISO 3166-1 alpha-2 code (two "
                                   "letters, such as RU, in any case)")


def test_two_letters_that_name_no_country_are_refused_with_the_banlist_s_list(client):
    # `UK` had been served without GB's bans: two letters, but no ISO 3166-1 code. The
    # engine's list is held to the iso3166 package's, which the banlist API refuses by.
    from iso3166 import countries_by_alpha2
    body = page(1)
    refused = set()
    for a in string.ascii_uppercase:
        for b in string.ascii_uppercase:
            body["query"]["region"] = a + b if b > "M" else (a + b).lower()  # either case
            r = client.post("/v1/rerank", json=body)
            assert r.status_code in (200, 422), r.text
            if r.status_code == 422:
                assert r.json()["field"] == "query.region"
                refused.add(a + b)
    assert refused == {a + b for a in string.ascii_uppercase for b in string.ascii_uppercase} \
        - set(countries_by_alpha2)
    body["query"]["region"] = "uk"
    assert client.post("/v1/rerank", json=body).json()["problem"] == (
        "'UK' is not an assigned ISO 3166-1 alpha-2 code (the United Kingdom is GB)")
    body = page(2)
    body["documents"][1]["blocked_regions"] = ["GB", "EU"]
    r = client.post("/v1/rerank", json=body)
    assert r.status_code == 422
    assert (r.json()["field"], r.json()["problem"]) == (
        "documents[1].blocked_regions[1]", "'EU' is not an assigned ISO 3166-1 alpha-2 code")


def test_experiment_assignment_in_response(client):
    out = client.post("/v1/rerank", json=page(2, unit={"user_id": "u-1"})).json()
    assert out["experiments"] == [{"experiment": "antispam_v7", "variant": "treatment",
                                   "bucket": 8340, "layer": None, "salt": None}]
    assert client.post("/v1/rerank", json=page(2)).json()["experiments"] == []


def test_empty_request_is_allowed_and_empty(client):
    out = client.post("/v1/rerank", json={"documents": []}).json()
    assert out["documents"] == [] and out["fallback"] is None


def test_filtered_to_empty_gets_a_fallback(client):
    body = page(2)
    for d in body["documents"]:
        d["adult_score"] = 0.99
    out = client.post("/v1/rerank", json=body).json()
    assert out["documents"] == []
    assert out["fallback"]["rule"] == "empty_result_fallback"
    assert "nothing safe" in out["fallback"]["reason"]


def test_audit_log_lines(client, settings):
    body = page(3, request_id="audited")
    body["documents"][0]["spam_score"] = 0.99
    client.post("/v1/rerank", json=body)
    client.app.state.services.audit_log.close()
    lines = [json.loads(x) for x in Path(settings.audit_log).read_text("utf-8").splitlines()]
    assert lines[-1]["request_id"] == "audited"
    assert lines[-1]["profile"] == "default" and lines[-1]["config_version"]
    assert lines[-1]["audit"][0]["rule"] == "spam_ban"


def test_audit_log_records_name_the_document_and_the_versions(client, settings):
    """T&S searches the log by site: each record names its document's URL (as sent) and
    canonical host, the line the config and banlist versions that decided."""
    client.post("/v1/banlist/entries", headers=AUTH,
                json={"scope": "domain", "value": "Banned.example", "reason": "legal"})
    body = page(2, request_id="why")
    body["documents"][0]["url"] = "HTTP://WWW.Banned.Example:80/a?x=1#frag"
    body["documents"][1]["url"] = "mailto:someone@example.com"
    out = client.post("/v1/rerank", json=body).json()
    client.app.state.services.audit_log.close()
    line = json.loads(Path(settings.audit_log).read_text("utf-8").splitlines()[-1])
    assert (line["config_version"], line["banlist_version"]) == (
        out["config_version"], out["banlist_version"]) and out["banlist_version"] >= 1
    records = {r["doc_id"]: r for r in line["audit"]}
    assert records["d0"]["url"] == body["documents"][0]["url"]
    assert records["d0"]["host"] == "www.banned.example"
    assert "domain banned.example banned (legal)" in records["d0"]["reason"]
    assert records["d1"]["url"] == "mailto:someone@example.com" and records["d1"]["host"] is None
    # the response's records stay the CONTRACT's: the same, without url and host
    assert out["audit"] == [{k: v for k, v in r.items() if k not in ("url", "host")}
                            for r in line["audit"]]


def _set(body, path, value):
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


BAD = [
    ("missing documents", lambda b: b.pop("documents") and b, "documents", 422),
    ("missing id", lambda b: b["documents"][2].pop("id") and b, "documents[2].id", 422),
    ("missing url", lambda b: b["documents"][0].pop("url") and b, "documents[0].url", 422),
    ("score as string", lambda b: _set(b, ["documents", 1, "score"], "8"),
     "documents[1].score", 422),
    ("score as bool", lambda b: _set(b, ["documents", 1, "score"], True),
     "documents[1].score", 422),
    ("spam over 1", lambda b: _set(b, ["documents", 0, "spam_score"], 1.5),
     "documents[0].spam_score", 422),
    ("adult negative", lambda b: _set(b, ["documents", 0, "adult_score"], -0.1),
     "documents[0].adult_score", 422),
    ("age negative", lambda b: _set(b, ["documents", 0, "domain_age_days"], -1),
     "documents[0].domain_age_days", 422),
    ("bad age mode", lambda b: _set(b, ["query", "age_mode"], "kids"), "query.age_mode", 422),
    ("unknown field", lambda b: _set(b, ["documents", 0, "spamscore"], 0.1),
     "documents[0].spamscore", 422),
    ("duplicate ids", lambda b: _set(b, ["documents", 3, "id"], "d0"), "documents[3].id", 422),
    ("unknown profile", lambda b: _set(b, ["profile"], "nope"), "profile", 422),
    ("empty id", lambda b: _set(b, ["documents", 2, "id"], ""), "documents[2].id", 422),
    ("depth zero", lambda b: _set(b, ["depth"], 0), "depth", 422),
    ("factor as string", lambda b: _set(b, ["documents", 0, "factors"], {"link": "x"}),
     "documents[0].factors.link", 422),
    ("factor too large", lambda b: _set(b, ["documents", 0, "factors"], {"a": 1, "link": 1e300}),
     "documents[0].factors.link", 422),
    ("score too large", lambda b: _set(b, ["documents", 0, "score"], -1e300),
     "documents[0].score", 422),
    ("unit not string", lambda b: _set(b, ["unit"], {"user_id": 5}), "unit.user_id", 422),
    ("documents not a list", lambda b: _set(b, ["documents"], {"id": "x"}), "documents", 422),
]


@pytest.mark.parametrize(("name", "mutate", "field", "status"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_field(client, name, mutate, field, status):
    r = client.post("/v1/rerank", json=mutate(page(5)))
    assert r.status_code == status, r.text
    assert r.json()["field"] == field
    assert r.json()["problem"]


@pytest.mark.parametrize(("raw", "field"), [
    # what Python's json.dumps writes by default: not JSON (400), named by where it stands
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": NaN}]}', "documents[0].score"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": Infinity}]}',
     "documents[0].score"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "factors": {"link": '
     b'-Infinity}}]}', "documents[0].factors.link"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "attributes": {"x": '
     b'[NaN]}}]}', "documents[0].attributes.x[0]"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": -NaN}]}', "body"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": NaNa}]}', "body"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": Infinity1}]}', "body"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": 1e999}]}', "documents[0].score"),
    # an out-of-range number in a map is named by its key
    (b'{"unit": {"user_id": "u", "team": 1e400}, "documents": []}', "unit.team"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "factors": {"link": 1,'
     b' "text": -1e999}}]}', "documents[0].factors.text"),
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "attributes": {"x": {"y":'
     b' [0, 1e999]}}}]}', "documents[0].attributes.x.y[1]"),
    # ints of any size are fine where the type is Any: only the float is out of range
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "attributes": {"big": 1'
     + b"0" * 40 + b', "x": 1e400}}]}', "documents[0].attributes.x"),
    # past the nesting bound: a 400, not a stack overflow
    (b'{"documents": [{"id": "a", "url": "http://a/", "score": 1, "attributes": {"a": '
     + b"[" * 5000 + b"]" * 5000 + b"}}]}", "body"),
    (b'{"documents": [', "body"),
    (b"", "body"),
    (b"[]", "body"),
    (b'\xff\xfe', "body"),
])
def test_non_json_numbers_and_malformed_bodies(client, raw, field):
    r = client.post("/v1/rerank", content=raw, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.json()["field"] == field
    if (b"NaN" in raw or b"Infinity" in raw) and field != "body":  # named where it stands
        assert r.status_code == 400
        assert r.json()["problem"].startswith("not valid JSON")


def test_limits_on_documents_body_and_text(client):
    service = client.app.state.services.rearranger
    service.settings = service.settings.model_copy(
        update={"max_documents": 3, "max_text_chars": 10, "max_body_bytes": 2048})
    r = client.post("/v1/rerank", json=page(4))
    assert r.status_code == 413 and r.json()["field"] == "documents"
    body = page(2)
    body["documents"][1]["text"] = "x" * 11
    r = client.post("/v1/rerank", json=body)
    assert r.status_code == 413 and r.json()["field"] == "documents[1].text"
    body["documents"][1]["text"] = "y" * 3000
    r = client.post("/v1/rerank", json=body)
    assert r.status_code == 413 and r.json()["field"] == "body"


def test_openapi_documents_the_rerank_body(client):
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/rerank"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/RerankRequest"}
    doc = spec["components"]["schemas"]["Document"]
    assert set(doc["required"]) == {"id", "url", "score"}


@pytest.mark.python_path("changes the request path's deadline between two requests: the "
                         "listener reads its settings once, when it starts")
def test_past_the_deadline_near_duplicates_is_skipped_and_said(client):
    service = client.app.state.services.rearranger
    body = page(3)
    for d in body["documents"]:
        d["text"] = "the same template text of more than ten words on every page here"
    full = client.post("/v1/rerank", json=body).json()
    assert "skipped" not in full and any(r["rule"] == "near_duplicates" for r in full["audit"])
    service.settings = service.settings.model_copy(update={"deadline_ms": 1e-6})
    late = client.post("/v1/rerank", json=body).json()
    assert late["skipped"] == [{"rule": "near_duplicates", "phase": "diversify",
                                "reason": "deadline"}]
    assert all(r["rule"] != "near_duplicates" for r in late["audit"])
    assert ('rearrange_rule_skipped_total{phase="diversify",reason="deadline",'
            'rule="near_duplicates"} 1.0') in client.get("/metrics").text


@pytest.mark.python_path("a fake clock: the listener reads the monotonic clock")
def test_near_duplicates_cut_by_the_deadline_while_running_is_said(settings):
    """On a clock a second later at each reading, the deadline passes after about 60: the
    runner reads it once before the rule, then the rule once per text it shingles, so it
    passes midway through 300 texts."""
    clock = Ticking(step=0.0)  # stopped: the rule finishes
    settings.deadline_ms = 62_500  # reads: the arrival, the budget's, the engine's, then 60
    docs = [{"id": f"d{i}", "url": f"https://h{i}.example.com/", "score": 500.0 - i,
             "text": " ".join(f"word{j}of{i}" for j in range(12))}  # no shingle shared
            for i in range(300)]
    docs[1]["text"] = docs[0]["text"]  # d1 folds under d0 when the rule finishes
    body = {"query": {"text": "q"}, "depth": 300, "documents": docs, "request_id": "cut"}
    with TestClient(app_of(build_services(settings, clock=clock))) as client:
        full = client.post("/v1/rerank", json=body).json()
        assert "skipped" not in full
        assert [c["id"] for c in full["documents"][0]["collapsed"]] == ["d1"]
        clock.step = 1.0
        late = client.post("/v1/rerank", json={**body, "documents": [
            {**d, "text": d["text"] + " again"} for d in docs]}).json()  # not cached: anew
        metrics = client.get("/metrics").text
    assert late["skipped"] == [{"rule": "near_duplicates", "phase": "diversify",
                                "reason": "deadline"}]  # the CONTRACT's, stopped or not
    assert [d["id"] for d in late["documents"]] == [d["id"] for d in docs]
    assert all(d["collapsed"] == [] for d in late["documents"])
    assert all(r["rule"] != "near_duplicates" for r in late["audit"])
    assert ('rearrange_rule_skipped_total{phase="diversify",'
            'reason="deadline_stopped",rule="near_duplicates"} 1.0') in metrics
    lines = [json.loads(x) for x in Path(settings.audit_log).read_text("utf-8").splitlines()]
    assert lines[-1]["request_id"] == "cut" and lines[-1]["skipped"] == late["skipped"]


def test_a_request_whose_only_event_is_a_skipped_rule_is_audit_logged(client, settings):
    service = client.app.state.services.rearranger
    body = page(2, request_id="only-skipped")
    body["documents"][0]["text"] = "one text of more than ten words that is not repeated anywhere"
    body["documents"][1]["text"] = "another text of more than ten words, different from the first"
    service.settings = service.settings.model_copy(update={"deadline_ms": 1e-6})
    out = client.post("/v1/rerank", json=body).json()
    assert out["audit"] == [] and out["experiments"] == []
    service.audit_log.close()
    lines = [json.loads(x) for x in Path(settings.audit_log).read_text("utf-8").splitlines()]
    assert lines[-1]["request_id"] == "only-skipped"
    assert lines[-1]["skipped"] == [{"rule": "near_duplicates", "phase": "diversify",
                                     "reason": "deadline"}]


def test_an_out_of_range_number_in_a_map_is_named_in_a_body_of_any_size(client):
    """The engine's decoder names the key where it meets the number, in one pass: a body
    over 1 MiB gets the same field as a small one."""
    filler = [{"id": f"d{i}", "url": f"http://h{i}.example/", "score": 1.0,
               "attributes": {"pad": "x" * 2000}} for i in range(600)]
    body = json.dumps({"documents": filler, "unit": {"u": "v"}}).encode()
    body = body.replace(b'"unit": {"u": "v"}', b'"unit": {"u": "v", "n": 1e400}')
    assert len(body) > 1 << 20
    small = b'{"documents": [], "unit": {"u": "v", "n": 1e400}}'
    head = {"content-type": "application/json"}
    for sent in (body, small):
        r = client.post("/v1/rerank", content=sent, headers=head)
        assert r.status_code == 422 and r.json()["field"] == "unit.n"
