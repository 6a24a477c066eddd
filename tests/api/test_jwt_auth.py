"""Signed-in analysts (issue 49): the admin routes take JWTs of an identity provider,
checked against its JWKS, a file or a URL served from a thread; every refusal says why.
The keys are generated here and the tokens signed by PyJWT (tests/idp.py)."""
from __future__ import annotations

import logging
import time

import pytest
from fastapi.testclient import TestClient

from app.api.app import app_of
from app.api.auth import rights_of
from app.api.jwks import TokenRefused
from app.api.services import build_services
from app.config.settings import Settings
from app.errors import SettingsError
from app.main import create_app
from bench.replicas import free_port
from tests.conftest import AUTH, TOKENS
from tests.helpers import counted
from tests.idp import (
    AUDIENCE,
    ISSUER,
    JwksServer,
    ec_key,
    ed_key,
    hs256_with_public_key,
    mint,
    public_jwk,
    rsa_key,
    unsigned,
    write_jwks,
)

BAN = {"scope": "host", "value": "spam.example", "reason": "phishing kit"}
ENTRIES = "/v1/banlist/entries"


@pytest.fixture(scope="module")
def keys():
    """The provider's keys, and one it does not publish (an attacker's)."""
    return {"rsa": rsa_key(), "ec": ec_key(), "ed": ed_key(), "other": rsa_key()}


def published(keys):
    return [public_jwk(keys["rsa"], "rsa-1"), public_jwk(keys["ec"], "ec-1"),
            public_jwk(keys["ed"], "ed-1", alg="EdDSA")]


def with_jwks(settings: Settings, source, **extra) -> Settings:
    return settings.model_copy(update={
        "admin_jwks": str(source), "admin_jwt_issuer": ISSUER, "admin_jwt_audience": AUDIENCE,
        "admin_tokens": TOKENS + ",viewer:view-token:read", **extra})


@pytest.fixture
def client(settings, keys, tmp_path):
    jwks = write_jwks(tmp_path / "jwks.json", *published(keys))
    with TestClient(create_app(with_jwks(settings, jwks))) as c:
        yield c


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_actor_of_a_jwt_write_is_its_sub_in_the_entry_and_the_history(client, keys):
    alice = mint(keys["rsa"], "rsa-1", sub="alice@tns")
    bob = mint(keys["ec"], "ec-1", alg="ES256", sub="bob@tns", scope=None,
               scp=["openid", "rearrange:write"])
    added = client.post(ENTRIES, json=BAN, headers=bearer(alice))
    assert added.status_code == 201, added.text
    entry = added.json()["entry"]
    assert entry["actor"] == "alice@tns"
    removed = client.request("DELETE", f"{ENTRIES}/{entry['id']}", json={"reason": "appeal"},
                             headers=bearer(bob))
    assert removed.status_code == 200, removed.text
    changes = client.get("/v1/banlist/changes").json()["changes"]
    assert [(c["op"], c["actor"]) for c in changes] == [("add", "alice@tns"),
                                                         ("remove", "bob@tns")]
    mine = client.get("/v1/banlist/changes", params={"actor": "bob@tns"}).json()["changes"]
    assert [c["op"] for c in mine] == ["remove"]
    reload = client.post("/v1/admin/config/reload", headers=bearer(alice))
    assert reload.status_code == 200 and reload.json()["by"] == "alice@tns"


def test_an_eddsa_token_with_read_scope_reads_the_config(client, keys):
    token = mint(keys["ed"], "ed-1", alg="EdDSA", sub="carol@tns", scope="openid rearrange:read")
    r = client.get("/v1/admin/config", headers=bearer(token))
    assert r.status_code == 200 and r.json()["version"]


def _expired(keys):
    now = int(time.time())
    return mint(keys["rsa"], "rsa-1", iat=now - 900, nbf=now - 900, exp=now - 60)


# reason, the token, what the problem says
REFUSED = [
    ("expired", _expired, "the token has expired (exp)"),
    ("not_yet_valid", lambda k: mint(k["rsa"], "rsa-1", nbf=int(time.time()) + 600),
     "the token is not valid yet (nbf)"),
    ("wrong_issuer", lambda k: mint(k["rsa"], "rsa-1", iss="https://evil.test/"),
     f"the token's issuer (iss) is not {ISSUER}"),
    ("wrong_audience", lambda k: mint(k["rsa"], "rsa-1", aud="another-app"),
     f"the token's audience (aud) is not {AUDIENCE}"),
    ("unsigned", lambda k: unsigned("rsa-1"), "the token is not signed (alg none)"),
    ("disallowed_algorithm", lambda k: hs256_with_public_key(k["rsa"], "rsa-1"),
     "alg 'HS256' is not accepted (only RS256, RS384, RS512, PS256, PS384, PS512, ES256, "
     "ES384, EdDSA)"),
    ("bad_signature", lambda k: mint(k["other"], "rsa-1"),
     "the signature does not verify with the key its kid names"),
    ("unknown_kid", lambda k: mint(k["other"], "rsa-9"),
     "no key 'rsa-9' in the JWKS (REARRANGE_ADMIN_JWKS)"),
    ("key_mismatch", lambda k: mint(k["ec"], "rsa-1", alg="ES256"),
     "the key 'rsa-1' is an RSA key, the token's ES256 needs another"),
    ("key_mismatch", lambda k: mint(k["rsa"], "ed-1", alg="RS256"),
     "the key 'ed-1' is for EdDSA, the token says RS256"),
    ("malformed", lambda k: "not.a.jwt", None),
    ("malformed", lambda k: "%%%." + mint(k["rsa"], "rsa-1").split(".", 1)[1], None),
    ("malformed", lambda k: mint(k["rsa"], None), "the token's header names no key (kid)"),
    ("missing_claim", lambda k: mint(k["rsa"], "rsa-1", sub=None), "the token has no sub claim"),
    ("missing_claim", lambda k: mint(k["rsa"], "rsa-1", exp=None), "the token has no exp claim"),
    ("bad_claim", lambda k: mint(k["rsa"], "rsa-1", sub=" "), "the token's sub is not a name"),
    ("bad_claim", lambda k: mint(k["rsa"], "rsa-1", scope=None, scp=7),
     "the token's scp is neither a space-separated string nor a list of strings"),
]


@pytest.mark.parametrize(("reason", "make", "problem"), REFUSED,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSED)])
def test_a_refused_token_is_401_naming_why_and_counted(client, keys, reason, make, problem):
    r = client.post(ENTRIES, json=BAN, headers=bearer(make(keys)))
    assert r.status_code == 401, r.text
    body = r.json()
    assert body["error"] == "invalid_request" and body["field"] == "Authorization"
    assert body["reason"] == reason
    if problem is not None:
        assert body["problem"] == problem
    challenge = r.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", error_description="')
    assert '"' not in challenge.removeprefix('Bearer error="invalid_token", error_description="'
                                             )[:-1]
    assert counted(client, "rearrange_auth_failures_total", reason=reason) == 1
    assert client.get(ENTRIES).json()["entries"] == []  # nothing written


def test_a_valid_token_without_the_right_is_403_naming_the_missing_scope(client, keys):
    reader = mint(keys["rsa"], "rsa-1", sub="dave@tns", scope="openid rearrange:read")
    r = client.post(ENTRIES, json=BAN, headers=bearer(reader))
    assert r.status_code == 403
    assert r.json() == {"error": "invalid_request", "field": "Authorization",
                        "problem": "the token of dave@tns lacks the scope rearrange:write",
                        "reason": "insufficient_scope", "missing_scope": "rearrange:write"}
    assert r.headers["www-authenticate"] == ('Bearer error="insufficient_scope", '
                                             'scope="rearrange:write"')
    assert client.get("/v1/admin/config", headers=bearer(reader)).status_code == 200
    for scope in (None, "openid profile", "rearrange:approve"):  # approve alone reads nothing
        token = mint(keys["rsa"], "rsa-1", sub="erin@tns", scope=scope)
        r = client.get("/v1/admin/config", headers=bearer(token))
        assert r.status_code == 403 and r.json()["missing_scope"] == "rearrange:read", scope
    assert counted(client, "rearrange_auth_failures_total", reason="insufficient_scope") == 4
    assert client.get(ENTRIES).json()["entries"] == []


def test_static_tokens_answer_exactly_as_before_beside_jwts(client):
    r = client.post(ENTRIES, json=BAN, headers=AUTH)
    assert r.status_code == 201 and r.json()["entry"]["actor"] == "tns"
    r = client.post(ENTRIES, json=BAN, headers=bearer("nope"))
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert r.json() == {"error": "invalid_request", "field": "Authorization",
                        "problem": "unknown token"}
    r = client.post(ENTRIES, json=BAN)
    assert r.status_code == 401 and r.json()["problem"] == "Bearer token required"
    r = client.post(ENTRIES, json=BAN, headers=bearer("view-token"))
    assert r.status_code == 403 and r.json() == {
        "error": "invalid_request", "field": "Authorization",
        "problem": "the token of viewer is read-only"}
    assert counted(client, "rearrange_auth_failures_total", reason="unknown_token") == 1
    assert counted(client, "rearrange_auth_failures_total", reason="missing") == 1


def test_open_banlist_reads_take_a_valid_jwt_of_any_scope_and_refuse_a_bad_one(client, keys):
    nobody = mint(keys["rsa"], "rsa-1", scope=None)
    assert client.get(ENTRIES, headers=bearer(nobody)).status_code == 200
    r = client.get(ENTRIES, headers=bearer(_expired(keys)))
    assert r.status_code == 401 and r.json()["reason"] == "expired"


def test_scopes_give_rights_from_scope_and_scp_write_implying_read():
    assert rights_of({"scope": "openid rearrange:write"}) == {"read", "write"}
    assert rights_of({"scp": ["rearrange:read", "rearrange:approve"]}) == {"read", "approve"}
    assert rights_of({"scp": "rearrange:approve"}) == {"approve"}
    assert rights_of({"scope": "rearrange:read", "scp": ["rearrange:write"]}) == {"read",
                                                                                  "write"}
    assert rights_of({"scope": "rearrange:admin other:write rearrange"}) == set()
    assert rights_of({}) == set()
    with pytest.raises(TokenRefused) as refused:
        rights_of({"scp": ["rearrange:read", 1]})
    assert refused.value.reason == "bad_claim"


def test_the_document_lists_a_jwts_refusals_only_when_jwts_are_taken(client, settings):
    op = client.get("/openapi.json").json()["paths"][ENTRIES]["post"]["responses"]
    assert "rearrange:write" in op["403"]["description"]
    assert "reason" in op["401"]["description"] and "503" in op
    with TestClient(create_app(settings)) as plain:
        op = plain.get("/openapi.json").json()["paths"]["/v1/admin/config"]["get"]["responses"]
    assert "403" not in op and "JWT" not in op["401"]["description"]


# --- keys from a URL ------------------------------------------------------------------


def app_at(settings: Settings, now: list[float]):
    """The app with its clock at now[0] (monotonic seconds): a test moves time on itself,
    so the keys' refresh and cooldown fall where it says, however slow the machine."""
    return app_of(build_services(settings, clock=lambda: now[0]))


def test_url_keys_are_fetched_once_and_a_rotated_key_after_the_cooldown(settings, keys):
    with JwksServer(public_jwk(keys["rsa"], "rsa-1")) as idp:
        cooldown, now = 0.3, [0.0]
        app = app_at(with_jwks(settings, idp.url, admin_jwks_cooldown_seconds=cooldown), now)
        with TestClient(app) as c:
            assert idp.fetches == 0  # nothing asked before a JWT needs it
            for n in range(3):
                r = c.post(ENTRIES, json={**BAN, "value": f"s{n}.example"},
                           headers=bearer(mint(keys["rsa"], "rsa-1")))
                assert r.status_code == 201, r.text
            assert idp.fetches == 1
            rotated = rsa_key()  # the provider publishes a new key, then signs with it
            idp.keys.append(public_jwk(rotated, "rsa-2"))
            now[0] += cooldown + 0.05
            r = c.post(ENTRIES, json=BAN, headers=bearer(mint(rotated, "rsa-2", sub="new@tns")))
            assert r.status_code == 201 and r.json()["entry"]["actor"] == "new@tns"
            assert idp.fetches == 2
            assert counted(c, "rearrange_auth_jwks_fetches_total", result="ok") == 2


def test_made_up_kids_cost_one_fetch_per_cooldown_not_one_per_request(settings, keys):
    with JwksServer(public_jwk(keys["rsa"], "rsa-1")) as idp:
        app = create_app(with_jwks(settings, idp.url, admin_jwks_cooldown_seconds=60))
        with TestClient(app) as c:
            for n in range(30):
                r = c.post(ENTRIES, json=BAN, headers=bearer(mint(keys["other"], f"k{n}")))
                assert r.status_code == 401 and r.json()["reason"] == "unknown_kid"
            assert idp.fetches == 1
            assert counted(c, "rearrange_auth_failures_total", reason="unknown_kid") == 30


def test_an_unreachable_jwks_url_fails_closed_logged_once_static_tokens_still_work(
        settings, keys, caplog):
    url = f"http://127.0.0.1:{free_port()}/jwks"  # nothing listens there
    app = create_app(with_jwks(settings, url, admin_jwks_cooldown_seconds=60,
                               admin_jwks_timeout_seconds=2))
    with TestClient(app) as c, caplog.at_level(logging.ERROR, logger="rearrange.auth"):
        for _ in range(4):
            r = c.post(ENTRIES, json=BAN, headers=bearer(mint(keys["rsa"], "rsa-1")))
            assert r.status_code == 503, r.text
            body = r.json()
            assert body["field"] == "Authorization" and body["reason"] == "jwks_unavailable"
            assert body["problem"].startswith(f"the signing keys cannot be fetched from {url}")
            assert 0 < int(r.headers["retry-after"]) <= 60
        assert c.get(ENTRIES).json()["entries"] == []
        assert c.post(ENTRIES, json=BAN, headers=AUTH).status_code == 201
        assert counted(c, "rearrange_auth_jwks_fetches_total", result="failed") == 1
        assert counted(c, "rearrange_auth_failures_total", reason="jwks_unavailable") == 4
    errors = [rec for rec in caplog.records if rec.name == "rearrange.auth"]
    assert len(errors) == 1 and url in errors[0].getMessage()


def test_held_keys_outlive_a_failed_refresh_and_a_provider_back_serves_again(settings, keys,
                                                                           caplog):
    with JwksServer(public_jwk(keys["rsa"], "rsa-1")) as idp:
        now = [0.0]
        app = app_at(with_jwks(settings, idp.url, admin_jwks_cooldown_seconds=0.2,
                               admin_jwks_refresh_seconds=0.2), now)
        with TestClient(app) as c, caplog.at_level(logging.WARNING, logger="rearrange.auth"):
            idp.failing = True
            r = c.get("/v1/admin/config", headers=bearer(mint(keys["rsa"], "rsa-1")))
            assert r.status_code == 503
            idp.failing = False
            now[0] += 0.25
            r = c.get("/v1/admin/config", headers=bearer(mint(keys["rsa"], "rsa-1")))
            assert r.status_code == 200, r.text
            idp.failing = True
            now[0] += 0.25  # the keys are due again: the fetch fails, rsa-1 is still held
            r = c.get("/v1/admin/config", headers=bearer(mint(keys["rsa"], "rsa-1")))
            assert r.status_code == 200, r.text
            r = c.get("/v1/admin/config", headers=bearer(mint(keys["other"], "rsa-2")))
            assert r.status_code == 503  # a new key or a forged one: it cannot be told
            assert idp.fetches == 3
            assert counted(c, "rearrange_auth_jwks_fetches_total", result="failed") == 2
    said = [rec.levelname for rec in caplog.records if rec.name == "rearrange.auth"]
    assert said == ["ERROR", "WARNING", "ERROR"]  # failing, back, failing again


def test_a_key_the_provider_withdrew_is_refused_once_the_keys_are_fetched_again(settings,
                                                                            keys):
    with JwksServer(public_jwk(keys["rsa"], "rsa-1"), public_jwk(keys["other"], "old")) as idp:
        now = [0.0]
        app = app_at(with_jwks(settings, idp.url, admin_jwks_cooldown_seconds=0.1,
                               admin_jwks_refresh_seconds=0.3), now)
        with TestClient(app) as c:
            old = mint(keys["other"], "old")
            assert c.get("/v1/admin/config", headers=bearer(old)).status_code == 200
            idp.keys = [public_jwk(keys["rsa"], "rsa-1")]  # revoked at the provider
            assert c.get("/v1/admin/config", headers=bearer(old)).status_code == 200  # held
            now[0] += 0.35
            r = c.get("/v1/admin/config", headers=bearer(old))
            assert r.status_code == 401 and r.json()["reason"] == "unknown_kid"
            assert idp.fetches == 2


# --- the start --------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "problem"), [
    ("{", "not JSON"),
    ('{"keys": {}}', "not a JWKS"),
    ('{"keys": [{"kty": "oct", "kid": "h", "k": "c2VjcmV0"}]}', "no public signing key"),
])
def test_a_jwks_file_that_is_not_one_stops_the_start_naming_it(settings, tmp_path, content,
                                                               problem):
    path = tmp_path / "jwks.json"
    path.write_text(content)
    with pytest.raises(SettingsError) as info:
        create_app(with_jwks(settings, path))
    assert str(info.value).startswith(f"REARRANGE_ADMIN_JWKS: {path}: {problem}")
