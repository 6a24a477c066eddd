"""The OpenAPI document says what the service does: bodies, errors, auth, media types; and
Swagger UI and ReDoc work with no network (tests/api/test_fuzz.py holds every answer to it,
tests/api/test_wire_schema.py /v1/rerank's)."""
from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from app.api.openapi import _operations
from app.main import create_app
from tests.conftest import AUTH

ADMIN = ("/v1/admin/", "/v1/sanctions/scores", "/v1/banlist/writes/")


@pytest.fixture
def doc(client):
    return client.get("/openapi.json").json()


def operations(doc):
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            yield f"{method.upper()} {path}", op


def test_every_refusal_has_the_error_body_and_fastapi_s_is_gone(doc):
    assert not {"HTTPValidationError", "ValidationError"} & set(doc["components"]["schemas"])
    error = doc["components"]["schemas"]["ErrorBody"]
    assert error["required"] == ["error", "field", "problem"]
    for label, op in operations(doc):
        for status, response in op["responses"].items():
            if status[0] in "45" and label not in ("GET /readyz",):
                schema = response["content"]["application/json"]["schema"]["$ref"]
                want = "RuleFailed" if status == "503" and label in (
                        "POST /v1/rerank", "POST /v1/admin/config/try") else \
                    "ErrorBody"
                assert schema == f"#/components/schemas/{want}", (label, status)


def test_every_status_a_route_declares_is_in_the_document(client, doc):
    # the reload's 422 (an invalid file) had been dropped with FastAPI's own, for a route
    # that takes no parameter and no body
    checked = set()
    for route, op in _operations(client.app, doc):
        assert {str(s) for s in route.responses} <= set(op["responses"]), route.path_format
        checked.add(route.path_format)
    assert "/v1/admin/config/reload" in checked
    reload = doc["paths"]["/v1/admin/config/reload"]["post"]["responses"]["422"]
    assert reload["description"].startswith("the file is invalid")


def test_the_rerank_answer_is_the_contract_s(doc):
    op = doc["paths"]["/v1/rerank"]["post"]
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/RerankResponse"}
    assert set(op["responses"]) == {"200", "400", "401", "403", "408", "413", "422", "503"}
    schemas = doc["components"]["schemas"]
    assert sorted(schemas["AuditRecord"]["properties"]["action"]["enum"]) == sorted([
        "remove", "rescore", "move", "collapse", "trim", "annotate", "fallback", "backfill"])
    assert "skipped" not in schemas["RerankResponse"]["required"]


def test_the_bearer_scheme_is_on_the_routes_that_take_a_token(doc):
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": doc["components"][
            "securitySchemes"]["bearer"]["description"]}
    for label, op in operations(doc):
        names = [p["name"].lower() for p in op.get("parameters", [])]
        assert "authorization" not in names, label  # the scheme says it, not a parameter
        # the frontend's two routes are open: a page and what the user clicked on it
        write = label.split()[0] in ("POST", "PUT", "PATCH", "DELETE") and \
            label not in ("POST /v1/rerank", "POST /v1/feedback")
        if write or any(part in label for part in ADMIN):
            assert op["security"] == [{"bearer": []}], label
            assert "401" in op["responses"], label
        elif label.startswith("GET /v1/banlist") or label == "GET /v1/sanctions/{host}":
            assert op["security"] == [{}, {"bearer": []}], label  # reads open by default
        elif label == "POST /v1/rerank":
            assert op["security"] == [{}, {"bearer": []}]  # only with the QA header
        else:
            assert "security" not in op, label


def test_closed_banlist_reads_require_the_token(settings):
    with TestClient(create_app(settings.model_copy(update={"banlist_read_auth": True}))) as c:
        doc = c.get("/openapi.json").json()
    assert doc["paths"]["/v1/banlist/lookup"]["get"]["security"] == [{"bearer": []}]


def test_media_types_of_metrics_export_and_import(doc, client):
    metrics = doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(metrics) == ["text/plain"]
    assert client.get("/metrics").headers["content-type"].startswith("text/plain")
    export = doc["paths"]["/v1/banlist/export"]["get"]["responses"]["200"]["content"]
    assert set(export) == {"application/x-ndjson", "text/csv"}
    body = doc["paths"]["/v1/banlist/import"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/x-ndjson", "text/csv"}
    assert "413" in doc["paths"]["/v1/banlist/import"]["post"]["responses"]


def test_a_405_allows_every_method_of_the_path(client):
    r = client.request("OPTIONS", "/v1/banlist/entries")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, POST"
    assert r.json()["error"] == "invalid_request"
    r = client.put("/v1/banlist/entries/1", headers=AUTH, json={})
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, PATCH"


def test_the_edit_of_an_entry_is_documented_with_its_body_and_refusals(doc):
    op = doc["paths"]["/v1/banlist/entries/{entry_id}"]["patch"]
    assert set(op["responses"]) == {"200", "400", "401", "403", "404", "408", "409", "413",
                                    "422", "503"}
    assert "regions" in op["responses"]["409"]["description"]
    body = op["requestBody"]["content"]["application/json"]["schema"]
    schema = doc["components"]["schemas"][body["$ref"].rpartition("/")[2]]
    assert schema["required"] == ["reason"] and schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"reason", "regions", "ttl_seconds", "expires_at"}
    assert {"type": "null"} in schema["properties"]["expires_at"]["anyOf"]  # null: permanent


def test_a_body_fastapi_cannot_decode_names_the_body(client):
    r = client.put("/v1/banlist/groups/x", content=b"\xff", headers={
        **AUTH, "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["field"] == "body"


def test_swagger_ui_and_redoc_load_only_their_packaged_assets(client):
    for page in ("/docs", "/redoc"):
        html = client.get(page).text
        urls = re.findall(r"""(?:src|href)=["']([^"']+)""", html) + re.findall(
            r"""url: ?['"]([^'"]+)""", html)
        assert urls and all(u.startswith("/") and not u.startswith("//") for u in urls), urls
        for url in urls:
            assert client.get(url).status_code == 200, url
    assert "persistAuthorization" in client.get("/docs").text
