"""The QA headers of /v1/rerank take a JWT as the admin routes do (issue 49), on both
request paths: explain with `rearrange:read`, forcing a variant with `rearrange:write`."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.engine.service import EXPLAIN_HEADER, FORCE_HEADER
from app.main import create_app
from tests.api.test_jwt_auth import bearer, counted, published, with_jwks
from tests.api.test_rerank import page
from tests.idp import ec_key, ed_key, mint, rsa_key, write_jwks

FORCE = {FORCE_HEADER: "antispam_v7=treatment"}


@pytest.fixture(scope="module")
def keys():
    return {"rsa": rsa_key(), "ec": ec_key(), "ed": ed_key()}


@pytest.fixture
def client(settings, keys, tmp_path):
    jwks = write_jwks(tmp_path / "jwks.json", *published(keys))
    with TestClient(create_app(with_jwks(settings, jwks))) as c:
        yield c


def test_a_read_jwt_explains_and_cannot_force_a_variant(client, keys):
    reader = mint(keys["rsa"], "rsa-1", sub="qa@tns", scope="rearrange:read")
    r = client.post("/v1/rerank", json=page(3), headers={EXPLAIN_HEADER: "true",
                                                         **bearer(reader)})
    assert r.status_code == 200 and "explain" in r.json()
    r = client.post("/v1/rerank", json=page(3, unit={"user_id": "u"}),
                    headers={**FORCE, **bearer(reader)})
    assert r.status_code == 403
    assert r.json()["field"] == FORCE_HEADER and r.json()["missing_scope"] == "rearrange:write"


def test_a_write_jwt_forces_a_variant_and_the_audit_line_names_its_sub(settings, keys,
                                                                       tmp_path):
    jwks = write_jwks(tmp_path / "jwks.json", *published(keys))
    writer = mint(keys["ec"], "ec-1", alg="ES256", sub="qa@tns")
    with TestClient(create_app(with_jwks(settings, jwks))) as c:
        r = c.post("/v1/rerank", json=page(3, unit={"user_id": "u"}, request_id="forced"),
                   headers={**FORCE, **bearer(writer)})
        assert r.status_code == 200, r.text
    assert r.json()["experiments"][0]["forced"]
    lines = [json.loads(x) for x in Path(settings.audit_log).read_text().splitlines()]
    (line,) = [x for x in lines if x["request_id"] == "forced"]
    assert line["forced_by"] == "qa@tns"


def test_an_expired_jwt_on_a_qa_header_is_401_naming_the_header_and_why(client, keys):
    now = int(time.time())
    token = mint(keys["rsa"], "rsa-1", iat=now - 900, nbf=now - 900, exp=now - 60)
    r = client.post("/v1/rerank", json=page(3), headers={EXPLAIN_HEADER: "true",
                                                         **bearer(token)})
    assert r.status_code == 401
    assert r.json()["field"] == EXPLAIN_HEADER and r.json()["reason"] == "expired"
    assert r.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert counted(client, "rearrange_auth_failures_total", reason="expired") == 1
