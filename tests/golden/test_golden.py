"""Golden HTTP files: whole /v1/rerank exchanges through the real app, compared to files
reviewed by hand against the seed's formulas (docs/development.md, "Tests").

Each file in tests/golden/cases/ holds one exchange: `about` (what it shows, with the
numbers worked out), optional `settings` (overrides of the service's Settings) and
`banlist` (entries the admin API adds first), the `request` (headers and a JSON body, or
`content` sent as it is), and the `response` (status and body) the app must give. Fields
that change on their own (`config_version`, a hash of tests/golden/rules.yaml) are masked.

`UPDATE_GOLDEN=1 pytest tests/golden` writes the app's responses into the files instead
of comparing them: review every changed file by eye (`git diff tests/golden`) before
committing it. CI never sets it.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.app import create_app
from tests.conftest import AUTH, service_settings

HERE = Path(__file__).parent
CASES = sorted((HERE / "cases").glob("*.json"))
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
MASKED = {"config_version": "<masked>"}


def masked(body: Any) -> Any:
    if isinstance(body, dict):
        return {k: MASKED.get(k, masked(v)) if k in MASKED else masked(v)
                for k, v in body.items()}
    if isinstance(body, list):
        return [masked(v) for v in body]
    return body


def exchange(case: dict[str, Any], tmp_path: Path) -> tuple[int, Any]:
    settings = service_settings(tmp_path, HERE / "rules.yaml", audit_log=None,
                                **case.get("settings", {}))
    with TestClient(create_app(settings)) as client:
        for entry in case.get("banlist", []):
            added = client.post("/v1/banlist/entries", headers=AUTH, json=entry)
            assert added.status_code == 201, added.text
        request = case["request"]
        headers = dict(request.get("headers", {}))
        if "content" in request:
            r = client.post("/v1/rerank", content=request["content"].encode(), headers=headers)
        else:
            r = client.post("/v1/rerank", json=request["json"], headers=headers)
    return r.status_code, masked(r.json())


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_the_golden_exchange(path: Path, tmp_path: Path) -> None:
    case = json.loads(path.read_text("utf-8"))
    status, body = exchange(case, tmp_path)
    got = {"status": status, "body": body}
    if UPDATE:
        case["response"] = got
        path.write_text(json.dumps(case, ensure_ascii=False, indent=1) + "\n", "utf-8")
        return
    assert "response" in case, f"{path.name}: no response yet; UPDATE_GOLDEN=1 writes it"
    assert got == case["response"]


def test_every_rule_has_a_golden_file() -> None:
    """A case per rule of the config (the body's `profile` names it)."""
    import yaml

    profiles = set(yaml.safe_load((HERE / "rules.yaml").read_text())["profiles"])
    covered = {json.loads(p.read_text("utf-8"))["request"].get("json", {}).get("profile")
               for p in CASES}
    assert profiles - {"default", "commercial"} <= covered
