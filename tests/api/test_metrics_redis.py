"""/metrics of a Redis-backed replica answers while Redis is stopped or gone: the series that
need Redis carry the last reading, and its age grows."""
from __future__ import annotations

import re
import time

from tests.conftest import app_on

SPAM = {"Authorization": "Bearer spam-token"}


def sample(text: str, name: str, labels: str = "") -> float | None:
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def scrape(client) -> str:
    got = client.get("/metrics")
    assert got.status_code == 200, got.text
    return got.text


def age(text: str) -> float:
    return sample(text, "rearrange_redis_reading_age_seconds", '{reading="sanction_hosts"}')


def until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.05)


def test_metrics_answer_with_the_last_reading_while_redis_is_stopped_then_gone(
        redis_server, settings):
    with app_on(redis_server, settings, "a") as a:
        for host, score in (("grey.example", 0.75), ("bad.example", 0.95)):
            assert a.post("/v1/sanctions/scores", headers=SPAM, json={"observations": [
                {"host": host, "spam_score": score, "observed_at": 1}]}).status_code == 200
        text = scrape(a)
        assert sample(text, "rearrange_sanction_hosts", '{state="quarantine"}') == 1
        fresh = age(text)
        assert fresh is not None and fresh < 5
        redis_server.pause()  # SIGSTOP: every Redis command hangs until the socket timeout
        try:
            ages = []
            for _ in range(3):
                text = scrape(a)  # 503 on main: the scrape read every host state from Redis
                assert sample(text, "rearrange_sanction_hosts", '{state="quarantine"}') == 1
                assert sample(text, "rearrange_sanction_hosts", '{state="banned"}') == 1
                ages.append(age(text))
            assert fresh < ages[0] < ages[1] < ages[2]
        finally:
            redis_server.resume()
        until(lambda: age(scrape(a)) < ages[2])  # Redis answers again: a fresh reading
        redis_server.kill()
        text = scrape(a)
        assert sample(text, "rearrange_sanction_hosts", '{state="banned"}') == 1
        gone = age(text)
        until(lambda: age(scrape(a)) > gone)
        assert sample(scrape(a), "rearrange_banlist_redis_errors_total", '{op="reading"}') >= 1
