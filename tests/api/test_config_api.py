"""Config versions through the admin API: the config served, its history, rollback."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import AUTH, ROOT, TOKENS

READ = {"Authorization": "Bearer read-token"}
PAGE = {"documents": [{"id": "a", "url": "http://x.com/1", "score": 2},
                      {"id": "b", "url": "http://y.com/1", "score": 1}]}
ONE = "profiles: {default: {trim: [{depth: {k: 1}}]}}\n"


@pytest.fixture
def app(settings):
    with TestClient(create_app(settings.model_copy(update={
            "admin_tokens": TOKENS + ",viewer:read-token:read"}))) as c:
        yield c


def serving(app) -> str:
    return app.post("/v1/rerank", json=PAGE).json()["config_version"]


def test_the_config_served_is_readable_with_any_admin_token(app, settings):
    assert app.get("/v1/admin/config").status_code == 401
    r = app.get("/v1/admin/config", headers=READ)
    assert r.status_code == 200
    got = r.json()
    assert got["version"] == serving(app) == got["file_version"]
    assert got["source"] == settings.config.read_text()
    assert (got["how"], got["by"], got["replication"]) == ("start", "start", None)
    assert got["loaded_at"].endswith("Z")


def test_versions_list_every_config_served_newest_first(app, settings):
    start = serving(app)
    settings.config.write_text(ONE)
    r = app.post("/v1/admin/config/reload", headers=AUTH)
    assert r.json()["changed"] is True
    versions = app.get("/v1/admin/config/versions", headers=READ).json()["versions"]
    assert [(v["version"], v["how"], v["by"]) for v in versions] == [
        (r.json()["config_version"], "reload", "tns"), (start, "start", "start")]
    assert "source" not in versions[0]
    old = app.get(f"/v1/admin/config/versions/{start}", headers=READ).json()
    assert old["source"] == (ROOT / "config" / "rules.yaml").read_text()
    assert (old["version"], old["how"]) == (start, "start")
    missing = app.get("/v1/admin/config/versions/ffffffffffffffff", headers=READ)
    assert missing.status_code == 404 and missing.json()["field"] == "version"


def test_rollback_serves_the_earlier_version_everywhere_a_response_names_it(app, settings):
    start = serving(app)
    settings.config.write_text(ONE)
    one = app.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
    assert len(app.post("/v1/rerank", json=PAGE).json()["documents"]) == 1
    r = app.post("/v1/admin/config/rollback", headers=AUTH, json={"version": start})
    assert r.status_code == 200
    assert (r.json()["config_version"], r.json()["changed"], r.json()["by"]) == (
        start, True, "tns")
    assert serving(app) == start and len(app.post("/v1/rerank", json=PAGE).json()[
        "documents"]) == 2
    got = app.get("/v1/admin/config", headers=READ).json()
    assert (got["version"], got["how"], got["by"], got["file_version"]) == (
        start, "rollback", "tns", one)
    again = app.post("/v1/admin/config/rollback", headers=AUTH, json={"version": start})
    assert again.json()["changed"] is False
    metrics = app.get("/metrics").text
    assert f'rearrange_config_info{{version="{start}"}} 1.0' in metrics
    assert f'rearrange_config_info{{version="{one}"}}' not in metrics


@pytest.mark.parametrize(("headers", "status", "field"), [
    ({}, 401, "Authorization"),
    (READ, 403, "Authorization"),
    ({"Authorization": "Bearer nope"}, 401, "Authorization"),
])
def test_rollback_needs_a_write_token(app, headers, status, field):
    r = app.post("/v1/admin/config/rollback", headers=headers, json={"version": serving(app)})
    assert (r.status_code, r.json()["field"]) == (status, field)


@pytest.mark.parametrize(("body", "field"), [
    ({}, "body.version"),
    ({"version": 5}, "body.version"),
    ({"version": None}, "body.version"),
    ({"version": ""}, "body.version"),
    ({"version": "x" * 65}, "body.version"),
    ({"version": "abc", "force": True}, "body.force"),
    (["abc"], "body"),
])
def test_a_body_that_is_not_a_version_is_422_naming_the_field(app, body, field):
    r = app.post("/v1/admin/config/rollback", headers=AUTH, json=body)
    assert (r.status_code, r.json()["field"]) == (422, field)


def test_a_body_that_is_not_json_is_refused_naming_the_body(app):
    r = app.post("/v1/admin/config/rollback", headers={**AUTH, "content-type":
                                                      "application/json"}, content=b"{nope")
    assert r.status_code == 422 and r.json()["field"].startswith("body")


def test_rollback_to_an_unknown_version_is_404(app):
    before = serving(app)
    r = app.post("/v1/admin/config/rollback", headers=AUTH,
                 json={"version": "0123456789abcdef"})
    assert (r.status_code, r.json()["field"]) == (404, "version")
    assert "0123456789abcdef" in r.json()["problem"] and serving(app) == before


def test_a_refused_rollback_is_409_naming_the_place_and_counted(app, settings):
    exp = ("profiles: {{default: {{rerank: [spam_demotion]}}}}\nexperiments:\n"
           "  - {{name: e, unit: user_id, variants: {{control: 10, treatment: {}}}, "
           "rules: [spam_demotion]}}\n")
    settings.config.write_text(exp.format(10))
    narrow = app.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
    settings.config.write_text(exp.format(30))
    wide = app.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
    r = app.post("/v1/admin/config/rollback", headers=AUTH, json={"version": narrow})
    assert r.status_code == 409
    assert (r.json()["field"], r.json()["serving"]) == ("experiments[0] e", wide)
    assert serving(app) == wide
    assert 'rearrange_config_reloads_total{result="refused"} 1.0' in app.get("/metrics").text


def test_reload_after_a_rollback_keeps_it_until_the_file_changes(app, settings):
    start = serving(app)
    settings.config.write_text(ONE)
    one = app.post("/v1/admin/config/reload", headers=AUTH).json()["config_version"]
    app.post("/v1/admin/config/rollback", headers=AUTH, json={"version": start})
    settings.config.write_text(ONE)  # the same content written again
    r = app.post("/v1/admin/config/reload", headers=AUTH).json()
    assert (r["config_version"], r["changed"], r["file_version"]) == (start, False, one)
    assert serving(app) == start
    settings.config.write_text(ONE.replace("k: 1", "k: 2"))
    r = app.post("/v1/admin/config/reload", headers=AUTH).json()
    assert r["changed"] is True and serving(app) == r["config_version"] == r["file_version"]
