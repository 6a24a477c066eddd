"""Settings from the environment: token parsing never leaks a secret in its errors, a
wait for Redis stays under its socket timeout, and a JWKS comes with its issuer and
audience."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.config.settings import Settings


def test_a_malformed_token_entry_is_named_by_its_actor_not_its_secret():
    with pytest.raises(ValueError) as info:
        Settings(admin_tokens="alice:s3cr3t-token:admin").tokens()
    assert "alice" in str(info.value) and "s3cr3t" not in str(info.value)


@pytest.mark.parametrize(("wait", "field"), [
    ({"redis_wait_ms": 1800}, "redis_wait_ms"),
    ({"banlist_block_seconds": 1.6}, "banlist_block_seconds"),
])
def test_a_wait_for_redis_longer_than_its_socket_timeout_is_refused_by_name(wait, field):
    """WAIT and XREAD BLOCK hold Redis's reply back on purpose: a socket timeout shorter
    than that would take every such wait for a Redis gone."""
    with pytest.raises(ValidationError) as info:
        Settings(redis_timeout_seconds=2, **wait)
    (error,) = info.value.errors()
    assert error["loc"] == (field,) and "REARRANGE_REDIS_TIMEOUT_SECONDS (2)" in error["msg"]
    Settings(redis_timeout_seconds=2.5, **wait)  # 0.5 s of margin: accepted


def test_a_jwks_needs_an_issuer_and_an_audience():
    with pytest.raises(ValidationError) as info:
        Settings(admin_jwks="https://idp.test/jwks")
    assert [e["loc"] for e in info.value.errors()] == [("admin_jwt_issuer",),
                                                      ("admin_jwt_audience",)]
    assert "is required with REARRANGE_ADMIN_JWKS" in str(info.value)
    with pytest.raises(ValidationError, match="a file path or an http"):
        Settings(admin_jwks="ftp://idp.test/jwks", admin_jwt_issuer="i",
                 admin_jwt_audience="a")
    assert Settings(admin_jwks="").admin_jwks is None  # unset: static tokens only
