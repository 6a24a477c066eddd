"""`rearrange banlist add | pending | approve | reject` through a review of a high-impact
ban, against a real service (on a thread) that served real traffic."""
from __future__ import annotations

import httpx
import pytest

from app.config.settings import Settings
from tests.cli.test_client import cli
from tests.conftest import ROOT
from tests.threaded import serving


@pytest.mark.python_path("a service on a thread has no data port")
def test_a_ban_waits_is_listed_approved_by_another_and_shown(tmp_path):
    settings = Settings(config=ROOT / "config" / "rules.yaml", banlist_path=tmp_path / "b.jsonl",
                        admin_tokens="alice:a,bob:b:approve", audit_log=None,
                        config_poll_seconds=0, redis_url=None, banlist_seed=None,
                        ban_review_share=0.01)
    with serving(settings) as base, httpx.Client(base_url=base) as http:
        for n in range(20):  # big.example on half the pages
            host = "www.big.example" if n % 2 else f"s{n}.small.example"
            http.post("/v1/rerank", json={"documents": [
                {"id": "a", "url": f"https://{host}/{n}", "score": 1}]}).raise_for_status()
        alice, bob = ("--url", base, "--token", "a"), ("--url", base, "--token", "b")
        code, out, err = cli("banlist", "add", "domain", "big.example", "--reason", "typo?",
                             *alice)
        assert code == 0, err
        assert "PENDING REVIEW: it would have removed results from 50.00% of the last hour's" \
            " requests (over 0.01)" in out
        assert "rearrange banlist approve 1 --reason" in out
        code, out, _ = cli("banlist", "pending", *alice)
        assert code == 0 and "big.example" in out and "50.000%" in out and "alice" in out
        code, out, _ = cli("banlist", "lookup", "https://www.big.example/", *alice)
        assert "not banned" in out and "PENDING REVIEW: pending ban 1 (domain big.example" in out
        # the proposer cannot approve; exit 1 with the service's reason
        code, _, err = cli("banlist", "approve", "1", "--reason", "mine", *alice)
        assert code == 1 and "the token of alice may not approve" in err, err
        code, out, err = cli("banlist", "approve", "1", "--reason", "ticket 12", *bob)
        assert code == 0, err
        assert "approved: entry 1 bans domain big.example (proposed by alice)" in out
        code, out, _ = cli("banlist", "lookup", "https://www.big.example/", *alice)
        assert "BANNED" in out and "PENDING REVIEW" not in out
        code, out, _ = cli("banlist", "pending", *alice)
        assert out.strip() == "no ban waits for review"
