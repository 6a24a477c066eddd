"""The T&S page at /admin in headless Chromium (Debian's, driven by Playwright) against two
replicas of one Redis, each served on a thread: an analyst's high-impact ban waits, a
second person approves it in the queue and it reaches the other replica; lookup, history,
extend, remove and a bulk removal after its dry run; every refusal shown with its field."""
from __future__ import annotations

import time

import httpx
import pytest

from app.config.settings import Settings
from tests import idp
from tests.api.test_inspector_browser import browser  # noqa: F401 (a fixture)
from tests.conftest import ROOT
from tests.helpers import until
from tests.threaded import serving_all

pytestmark = [pytest.mark.python_path("a service on a thread has no data port"),
              pytest.mark.redis]

TOKENS = "alice:a:write,bob:b:approve"
# 20 requests to replica a: news.big.example on 15 (75 %), shop.huge.example on 10 (50 %),
# filler hosts on the rest; a share of 0.01 sends bans of either to review, and not a ban of
# a host never served (share 0)
TRAFFIC = [[h for h in ("news.big.example" if n % 4 else None,
                        "shop.huge.example" if n % 2 else None, f"f{n}.filler.example") if h]
           for n in range(20)]
# Chromium logs every 4xx answer to a fetch as a console error; the refusals' test expects them
REFUSED = "error: Failed to load resource: the server responded with a status of 4"


@pytest.fixture(scope="module")
def signer():
    """The identity provider's signing key (tests/idp.py)."""
    return idp.ec_key()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory, signer):
    """(a, b): the base URLs of two replicas of one fresh Redis, taking the static TOKENS
    and the JWTs `signer` signs; a has served TRAFFIC."""
    from tests.redis_server import RedisServer

    tmp = tmp_path_factory.mktemp("admin-page")
    server = RedisServer(tmp / "redis").start()
    jwks = idp.write_jwks(tmp / "jwks.json", idp.public_jwk(signer, "ec-1", "ES256"))

    def settings(name: str) -> Settings:
        return Settings(config=ROOT / "config" / "rules.yaml", admin_tokens=TOKENS,
                        admin_jwks=str(jwks), admin_jwt_issuer=idp.ISSUER,
                        admin_jwt_audience=idp.AUDIENCE,
                        banlist_path=tmp / f"{name}.jsonl", audit_log=None,
                        config_poll_seconds=0, redis_url=server.url, banlist_seed=None,
                        ban_review_share=0.01, banlist_block_seconds=0.3,
                        banlist_snapshot_path=tmp / f"{name}.snapshot.json")

    try:
        with serving_all([settings("a"), settings("b")]) as (a, b):
            with httpx.Client(base_url=a) as http:
                for n, hosts in enumerate(TRAFFIC):
                    docs = [{"id": f"d{i}", "url": f"https://{h}/{n}", "score": 9 - i}
                            for i, h in enumerate(hosts)]
                    http.post("/v1/rerank", json={"documents": docs}).raise_for_status()
            yield a, b
    finally:
        server.kill()


@pytest.fixture
def page(browser, replicas):  # noqa: F811 (the fixture imported above)
    """The page of replica a in a fresh context (an empty session storage: signed out);
    what it logged to the console, and every URL it asked for."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(5000)
    p = context.new_page()
    messages: list[str] = []
    asked: list[str] = []
    p.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
    p.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
    p.on("request", lambda r: asked.append(r.url))
    p.goto(f"{replicas[0]}/admin")
    p.wait_for_selector("body[data-ready='1']")
    yield p, messages, asked
    context.close()


def act(p, selector: str, msg: str) -> tuple[str, str]:
    """Press `selector`; once every call it started is answered, the outcome the message
    `msg` shows (`pending`, `approved`, `error`, …) and its text."""
    p.evaluate("id => { delete document.getElementById(id).dataset.outcome; }", msg)
    p.click(selector)
    p.wait_for_function("id => document.body.dataset.busy === '0' && "
                        "document.getElementById(id).dataset.outcome", arg=msg)
    return p.get_attribute(f"#{msg}", "data-outcome") or "", p.inner_text(f"#{msg}")


def sign_in(p, token: str) -> tuple[str, str]:
    p.fill("#token", token)
    return act(p, "#sign-in", "who")


def add(p, scope: str, value: str, reason: str, ttl: str = "") -> tuple[str, str]:
    p.select_option("#add-scope", scope)
    p.fill("#add-value", value)
    p.fill("#add-reason", reason)
    p.fill("#add-ttl", ttl)
    return act(p, "#add button[type=submit]", "add-msg")


def look_up(p, url: str) -> str:
    p.fill("#lookup-url", url)
    outcome, text = act(p, "#lookup button[type=submit]", "lookup-msg")
    assert outcome == "idle", text
    return p.inner_text("#verdict")


def test_the_page_and_its_files_come_from_the_service_alone(replicas):
    a, _ = replicas
    html = httpx.get(f"{a}/admin")  # no token: the page is public, its calls are not
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert html.headers["content-security-policy"] == "default-src 'self'; frame-ancestors 'none'"
    assert "//" not in "".join(line for line in html.text.splitlines()
                               if "src=" in line or "href=" in line)
    assert "<script>" not in html.text and "style=" not in html.text  # the CSP forbids both
    for name in ("admin.js", "admin.css"):
        asset = httpx.get(f"{a}/admin/{name}")
        assert asset.status_code == 200 and "content-security-policy" in asset.headers
    for name in ("secrets.txt", "index.html", "__init__.py"):
        missing = httpx.get(f"{a}/admin/{name}")
        assert missing.status_code == 404 and missing.json()["field"] == "name"


def test_a_ban_waits_is_approved_by_another_and_reaches_the_other_replica(page, replicas):
    p, messages, asked = page
    a, b = replicas
    outcome, who = sign_in(p, "a")
    assert (outcome, who) == ("signed-in", "signed in with a static token")
    outcome, said = add(p, "domain", "big.example", "typo of bigg.example")
    assert outcome == "pending", said
    assert "PENDING REVIEW: domain big.example would have removed results from 75.00% of " \
           "the last hour's requests (over 1.00%)" in said
    assert "a second person who may approve must approve" in said
    queued = "#queue tr[data-pending]:has-text('domain big.example')"
    row = p.inner_text(queued)
    assert "domain big.example" in row and "alice" in row and "75.00% (15 of 20" in row
    # alice signs out (the queue goes with her), bob signs in and approves
    p.click("#sign-out")
    assert p.inner_text("#who").startswith("not signed in")
    assert p.evaluate("sessionStorage.length") == 0 and p.inner_text("#queue") == ""
    assert sign_in(p, "b")[0] == "signed-in"
    p.fill(f"{queued} input.reason", "checked the ticket: it is big.example")
    outcome, said = act(p, f"{queued} button.approve", "queue-msg")
    assert outcome == "approved", said
    assert "bans domain big.example (proposed by alice, approved by bob)" in said
    assert p.inner_text("#queue") == "no ban waits for review"
    # the other replica bans it too, through Redis
    until(lambda: httpx.get(f"{b}/v1/banlist/lookup", params={
        "url": "https://news.big.example/x"}).json()["banned"], 5)
    assert look_up(p, "news.big.example").startswith("BANNED")
    assert "domain big.example" in p.inner_text("#matches")
    history = p.inner_text("#history")  # the change is bob's, the ban alice's
    assert "entry 1: domain big.example (its actor alice)\tbob\t" in history
    assert messages == []
    assert [u for u in asked if not u.startswith(a + "/")] == []


def test_lookup_history_extend_remove_and_a_bulk_removal_after_its_dry_run(page, replicas):
    p, messages, _ = page
    a, _ = replicas
    sign_in(p, "a")
    outcome, said = add(p, "host", "s1.camp.example", "campaign 7", ttl="1h")
    assert outcome == "banned" and "Impact: 0.00% (0 of 20 requests)" in said, said
    for n in (2, 3):
        httpx.post(f"{a}/v1/banlist/entries", headers={"Authorization": "Bearer a"}, json={
            "scope": "host", "value": f"s{n}.camp.example", "reason": "campaign 7"})
    assert look_up(p, "https://s1.camp.example/offer").startswith("BANNED")
    row = "#matches tr[data-entry]"
    entry = p.get_attribute(row, "data-entry")
    assert "host s1.camp.example" in p.inner_text(row)
    # extend by 30 days, then make it permanent
    p.fill(f"{row} input.ttl", "30d")
    p.fill(f"{row} input.reason", "court order")
    outcome, said = act(p, f"{row} button.extend", "lookup-msg")
    assert outcome == "edited", said
    expires = httpx.get(f"{a}/v1/banlist/lookup", params={"url": "s1.camp.example"}).json()[
        "matches"][0]["expires_at"]
    assert expires > time.strftime("%Y-%m-%dT", time.gmtime(time.time() + 29 * 86400))
    p.fill(f"{row} input.reason", "court order: for good")
    outcome, said = act(p, f"{row} button.permanent", "lookup-msg")
    assert outcome == "edited" and said.endswith("now expires: never"), said
    history = p.inner_text("#history")
    assert history.index("court order: for good") < history.index("campaign 7")  # newest first
    assert "expires_at: 20" in history and "→ never" in history
    # remove it: no longer banned, a former entry with why
    p.fill(f"{row} input.reason", "appeal granted")
    outcome, said = act(p, f"{row} button.remove", "lookup-msg")
    assert outcome == "removed" and f"removed entry {entry}" in said, said
    assert p.inner_text("#verdict").startswith("not banned")
    assert "removed by alice: appeal granted" in p.inner_text("#former")
    # bulk: the dry run first, its count and sample; a change of the form asks for another
    p.fill("#bulk-value_suffix", ".camp.example")
    p.fill("#bulk-reason", "campaign 7 undone")
    outcome, said = act(p, "#bulk-count", "bulk-msg")
    assert outcome == "counted" and said.startswith("2 active entries match"), said
    assert len(p.query_selector_all("#bulk-sample tbody tr")) == 2
    assert p.inner_text("#bulk-confirm") == "Remove these 2 entries"
    p.fill("#bulk-reason", "campaign 7 undone (ticket 9)")
    assert p.is_hidden("#bulk-confirm")
    assert p.get_attribute("#bulk-msg", "data-outcome") == "stale"
    assert act(p, "#bulk-count", "bulk-msg")[0] == "counted"
    outcome, said = act(p, "#bulk-confirm", "bulk-msg")
    assert outcome == "removed" and said.startswith("removed 2 entries"), said
    left = httpx.get(f"{a}/v1/banlist/entries", params={"value_suffix": ".camp.example"})
    assert left.json()["entries"] == []
    assert messages == []


def test_every_refusal_is_shown_with_its_field(page, signer):
    p, messages, _ = page
    outcome, said = sign_in(p, "not-a-token")
    assert outcome == "error" and "HTTP 401: Authorization: unknown token" in said, said
    assert p.evaluate("sessionStorage.length") == 0
    # a JWT: its holder and scopes shown; a right it lacks is the service's 403
    token = idp.mint(signer, "ec-1", "ES256", sub="carol@tns", scope="rearrange:read")
    outcome, who = sign_in(p, token)
    assert outcome == "signed-in" and who.startswith(
        "signed in as carol@tns (JWT: rearrange:read, until 20"), who
    outcome, said = add(p, "domain", "spam.example", "spam")
    assert outcome == "error" and "HTTP 403: Authorization: the token of carol@tns lacks the " \
        "scope rearrange:write" in said, said
    p.click("#sign-out")
    assert sign_in(p, "b")[0] == "signed-in"
    # bob proposes a high-impact ban and cannot approve it himself
    assert add(p, "host", "shop.huge.example", "phishing")[0] == "pending"
    row = "#queue tr[data-pending]:has-text('host shop.huge.example')"
    p.fill(f"{row} input.reason", "looks right to me")
    outcome, said = act(p, f"{row} button.approve", "queue-msg")
    assert outcome == "error" and "HTTP 403: id:" in said and "second person" in said, said
    # the service's 422 names the field; the page's own check names its field too
    outcome, said = add(p, "domain", "exa mple.com", "spam")
    assert outcome == "error" and "HTTP 422: value:" in said, said
    outcome, said = add(p, "domain", "spam.example", "spam", ttl="soon")
    assert outcome == "error" and said.startswith('ttl: "soon" is no duration'), said
    p.fill("#bulk-reason", "everything")
    outcome, said = act(p, "#bulk-count", "bulk-msg")
    assert outcome == "error" and "HTTP 422: filter: empty" in said, said
    assert p.is_hidden("#bulk-confirm")
    assert [m for m in messages if not m.startswith(REFUSED)] == []
    # he may withdraw it
    p.fill(f"{row} input.reason", "withdrawn: wrong host")
    outcome, said = act(p, f"{row} button.reject", "queue-msg")
    assert outcome == "rejected" and "(host shop.huge.example)" in said, said
