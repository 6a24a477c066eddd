"""`rearrange sanctions show`'s lines, drawn from a real app's answers (in process): the
pin's expiry, a suppressed score, a parent's quarantine, times in ISO 8601 (issue 49)."""
from __future__ import annotations

import re
import time

from app.cli.sanctions import summary
from tests.conftest import AUTH

SPAM = {"Authorization": "Bearer spam-token"}
EPOCH = re.compile(r"\b1\d{9}\b")  # epoch seconds, as reasons printed them before


def observe(client, scope, key, score):
    r = client.post("/v1/sanctions/scores", headers=SPAM, json={"observations": [
        {scope: key, "spam_score": score, "observed_at": time.time()}]})
    assert r.status_code == 200 and r.json()["applied"] == 1, r.text


def show(client, host):
    got = client.get(f"/v1/sanctions/{host}")
    assert got.status_code == 200, got.text
    return got.json(), summary(got.json())


def test_a_pin_shows_its_expiry_and_what_it_holds_back(client):
    observe(client, "host", "shop.example", 0.95)
    client.post("/v1/sanctions/shop.example/clear", headers=AUTH, json={"reason": "appeal"})
    observe(client, "host", "shop.example", 0.99)
    got, lines = show(client, "shop.example")
    until = re.escape(time.strftime("%Y-%m-%dT", time.gmtime(got["pinned_until"])))
    assert re.match(rf"shop\.example \(host\): clean, score 0\.99 at \S+Z; pinned clean until "
                    rf"{until}\S+Z$", lines[0]), lines[0]
    assert re.match(r"suppressed: pinned clean until \S+Z by tns's appeal at \S+Z: spam_score "
                    r"0\.99 would make it banned$", lines[1]), lines[1]
    assert not any(EPOCH.search(h["reason"]) for h in got["history"])  # reasons in ISO 8601
    assert "(pinned clean until 20" in got["history"][-1]["reason"]


def test_an_ended_immunity_says_the_host_is_scored_as_usual(client):
    observe(client, "host", "brief.example", 0.95)
    client.post("/v1/sanctions/brief.example/clear", headers=AUTH,
                json={"reason": "appeal", "pin_seconds": 0.001})
    deadline = time.monotonic() + 2
    while show(client, "brief.example")[0]["pinned"] and time.monotonic() < deadline:
        time.sleep(0.001)  # polls the pin's end, 1 ms away
    _, lines = show(client, "brief.example")
    assert re.search(r"; appeal immunity ended \S+Z: scored as usual$", lines[0]), lines[0]


def test_a_host_under_a_quarantined_domain_is_not_shown_clean(client):
    observe(client, "domain", "yellow.example", 0.75)
    _, lines = show(client, "www.yellow.example")
    assert lines[0] == ("www.yellow.example (host): clean, no score yet; but quarantined via "
                        "yellow.example")
    assert lines[1].startswith("inherited: quarantined via domain yellow.example")
    assert "[quarantine entry " in lines[1] and "by antispam: spam_score 0.75 at 20" in lines[1]
    assert lines[2] == ("parent yellow.example (domain): quarantine, score 0.75; covers its "
                        "subdomains")
    observe(client, "host", "red.example", 0.95)
    _, lines = show(client, "www.red.example")
    assert lines == ["www.red.example (host): clean, no score yet",
                     "parent red.example (host): banned, score 0.95; scored as a host: "
                     "www.red.example is not covered"]
