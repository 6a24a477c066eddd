"""Shared fixtures: settings on temporary paths and a real app behind TestClient."""
from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
TOKENS = "tns:tns-token,antispam:spam-token"
AUTH = {"Authorization": "Bearer tns-token"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings of an isolated service: its own config copy, banlist log and audit log."""
    config = tmp_path / "rules.yaml"
    config.write_bytes((ROOT / "config" / "rules.yaml").read_bytes())
    return Settings(config=config, banlist_path=tmp_path / "banlist.jsonl",
                    admin_tokens=TOKENS, audit_log=str(tmp_path / "audit.jsonl"),
                    config_poll_seconds=0, redis_url=None, banlist_seed=None)


@pytest.fixture
def client(settings: Settings):
    """A TestClient around a freshly built app (lifespan run)."""
    with TestClient(create_app(settings)) as c:
        yield c
