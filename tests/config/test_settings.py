"""Settings from the environment: token parsing never leaks a secret in its errors."""
from __future__ import annotations

import pytest

from app.config.settings import Settings


def test_a_malformed_token_entry_is_named_by_its_actor_not_its_secret():
    with pytest.raises(ValueError) as info:
        Settings(admin_tokens="alice:s3cr3t-token:admin").tokens()
    assert "alice" in str(info.value) and "s3cr3t" not in str(info.value)
