"""The CLI with a JWT for its token (issue 49): it is a bearer string like a static token,
given with --token or REARRANGE_TOKEN, against a real `rearrange serve` whose JWKS is a
URL served from a thread."""
from __future__ import annotations

import json
import time

import pytest

from tests.api.test_live_server import start_server
from tests.cli.test_client import cli
from tests.idp import AUDIENCE, ISSUER, JwksServer, mint, public_jwk, rsa_key


@pytest.fixture(scope="module")
def signed_in(tmp_path_factory):
    """(the service's URL, the provider's key) of a service taking the provider's JWTs."""
    key = rsa_key()
    with JwksServer(public_jwk(key, "k1")) as idp:
        proc, base, _ = start_server(tmp_path_factory.mktemp("jwt"), REARRANGE_ADMIN_JWKS=idp.url,
                                     REARRANGE_ADMIN_JWT_ISSUER=ISSUER,
                                     REARRANGE_ADMIN_JWT_AUDIENCE=AUDIENCE)
        yield base, key
        proc.terminate()
        proc.wait(10)


def test_the_cli_bans_with_a_jwt_and_the_history_names_its_sub(signed_in, monkeypatch):
    base, key = signed_in
    token = mint(key, "k1", sub="alice@tns")
    code, out, err = cli("banlist", "--url", base, "--token", token, "add", "host",
                         "jwt.example", "--reason", "malware")
    assert code == 0 and "banlist version" in out, err
    monkeypatch.setenv("REARRANGE_TOKEN", mint(key, "k1", sub="bob@tns"))
    code, out, err = cli("banlist", "--url", base, "history", "--value", "jwt.example",
                         "--json")
    assert code == 0, err
    assert [c["actor"] for c in json.loads(out)["changes"]] == ["alice@tns"]
    code, out, err = cli("config", "--url", base, "versions")  # REARRANGE_TOKEN's
    assert code == 0 and "VERSION" in out, err


def test_the_cli_says_why_a_jwt_was_refused(signed_in):
    base, key = signed_in
    now = int(time.time())
    expired = mint(key, "k1", iat=now - 900, nbf=now - 900, exp=now - 60)
    code, _, err = cli("banlist", "--url", base, "--token", expired, "add", "host",
                       "x.example", "--reason", "r")
    assert code == 1
    assert "refused: HTTP 401: Authorization: the token has expired (exp)" in err
    reader = mint(key, "k1", sub="carol@tns", scope="rearrange:read")
    code, _, err = cli("banlist", "--url", base, "--token", reader, "add", "host",
                       "x.example", "--reason", "r")
    assert code == 1
    assert ("refused: HTTP 403: Authorization: the token of carol@tns lacks the scope "
            "rearrange:write") in err
