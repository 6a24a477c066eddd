"""The SERP inspector in headless Chromium (Debian's, driven by Playwright) against a real
`rearrange serve`: paste a request, see every step, the banlist's why, a candidate's diff."""
from __future__ import annotations

import json
import os
import shutil
import time

import httpx
import pytest

from tests.api.test_live_server import start_server
from tests.conftest import ROOT

pytestmark = pytest.mark.python_path("the browser's page calls the control port")

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SAMPLE = (ROOT / "config" / "request.sample.json").read_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The sample config and banlist, a write token `t`, a read-only `r`, every request
    captured, and no deadline: the tests compare the inspector's steps with a second
    request's, and on a loaded machine one of the two may pass 100 ms and skip the optional
    `near_duplicates` (seen in CI)."""
    tmp = tmp_path_factory.mktemp("inspector")
    proc, base, _ = start_server(
        tmp, REARRANGE_CONFIG=str(ROOT / "config" / "rules.yaml"),
        REARRANGE_BANLIST_SEED=str(ROOT / "config" / "banlist.sample.jsonl"),
        REARRANGE_ADMIN_TOKENS="tns:t,qa:r:read", REARRANGE_CONFIG_POLL_SECONDS="0",
        REARRANGE_CAPTURE_PATH=str(tmp / "capture.jsonl"), REARRANGE_CAPTURE_RATE="1",
        REARRANGE_DEADLINE_MS="0")
    yield base
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed here (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    p = context.new_page()
    messages: list[str] = []
    p.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
    p.on("pageerror", lambda e: messages.append(f"pageerror: {e}"))
    p.goto(f"{server}/inspector")
    p.wait_for_selector("body[data-ready='1']")
    yield p, messages
    context.close()


def inspect(p, token: str, request: str, candidate: str = "") -> None:
    p.fill("#token", token)
    p.dispatch_event("#token", "change")
    p.fill("#request", request)
    p.fill("#candidate", candidate)
    p.evaluate("document.body.removeAttribute('data-ready')")
    p.click("#inspect")
    p.wait_for_selector("body[data-ready='1']")


def test_the_page_and_its_files_come_from_the_service_alone(server):
    html = httpx.get(f"{server}/inspector")
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    assert html.headers["content-security-policy"].startswith("default-src 'self'")
    assert "//" not in "".join(line for line in html.text.splitlines()
                               if "src=" in line or "href=" in line)
    for name in ("inspector.js", "dom.js", "inspector.css", "example.json", "favicon.svg"):
        assert httpx.get(f"{server}/inspector/{name}").status_code == 200
    missing = httpx.get(f"{server}/inspector/secrets.txt")
    assert missing.status_code == 404 and missing.json()["field"] == "name"


def test_a_pasted_request_shows_every_step_and_the_banlist_why(page, server, tmp_path):
    p, messages = page
    inspect(p, "r", SAMPLE)
    p.screenshot(path=str(tmp_path / "inspector.png"), full_page=True)
    assert p.inner_text("#status").startswith("done"), p.inner_text("#status")
    served = httpx.post(f"{server}/v1/rerank", content=SAMPLE,
                        headers={"X-Rearrange-Explain": "true", "Authorization": "Bearer r",
                                 "content-type": "application/json"}).json()
    cards = p.query_selector_all(".step")
    assert [(c.get_attribute("data-rule"), c.get_attribute("data-status")) for c in cards] == [
        (s["rule"], s["status"]) for s in served["explain"]["steps"]]
    # The banlist's removal names the entry that matched, from /v1/banlist/lookup.
    removed = p.inner_text("#removed")
    assert "d4" in removed and "domain spam-farm.example: link farm (manual action)" in removed
    # Applied records sit in the applied column: d2's spam demotion.
    spam = p.query_selector(".step[data-rule='spam_demotion'] .col-applied")
    assert "spam_score 0.9: penalty 1 x lambda 5" in spam.inner_text()
    # The last step's page is the page served.
    last = [c.get_attribute("data-id") for c in cards[-1].query_selector_all(".page span")]
    assert last == [d["id"] for d in served["documents"]]
    assert messages == []


def test_a_candidate_config_is_diffed_against_the_served_page(page, tmp_path):
    p, messages = page
    candidate = (ROOT / "config" / "rules.yaml").read_text().replace(
        "{host_crowding: {max_per_host: 2}}", "{host_crowding: {max_per_host: 1}}")
    inspect(p, "t", SAMPLE, candidate)
    p.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
    assert not p.is_hidden("#diff-section")
    rows = {r.query_selector("td").inner_text(): r.get_attribute("class")
            for r in p.query_selector_all("#diff tbody tr")}
    assert rows["d5"] == "removed"  # a second shop.example.com result is folded now
    steps = p.inner_text("#diff")
    assert "host_crowding" in steps
    assert messages == []


def test_a_read_only_token_cannot_try_a_candidate_and_says_so(page):
    p, _ = page
    inspect(p, "r", SAMPLE, "profiles: {default: {}}")
    status = p.inner_text("#status")
    assert "HTTP 403" in status and "read-only" in status


def test_a_bad_request_is_reported_in_the_page(page):
    p, _ = page
    body = json.loads(SAMPLE)
    body["documents"][0]["score"] = "high"
    inspect(p, "r", json.dumps(body))
    assert "documents[0].score" in p.inner_text("#status")


def test_a_captured_request_can_be_picked_and_inspected(page, server):
    p, messages = page
    body = json.loads(SAMPLE)
    body["request_id"] = "picked-from-capture"
    assert httpx.post(f"{server}/v1/rerank", json=body).status_code == 200
    deadline = time.monotonic() + 10
    while not any(c["request"].get("request_id") == "picked-from-capture" for c in httpx.get(
            f"{server}/v1/admin/captures", headers={"Authorization": "Bearer r"}).json()[
            "captures"]):
        assert time.monotonic() < deadline, "the request never reached the capture file"
        time.sleep(0.05)
    p.fill("#token", "r")
    p.dispatch_event("#token", "change")
    p.wait_for_selector("#captured option:nth-child(2)", state="attached")
    p.select_option("#captured", index=1)  # the newest first
    assert json.loads(p.input_value("#request")) == body
    p.evaluate("document.body.removeAttribute('data-ready')")
    p.click("#inspect")
    p.wait_for_selector("body[data-ready='1']")
    assert "first" not in p.inner_text("#summary")
    assert "picked-from-capture" in p.inner_text("#summary")
    assert messages == []
