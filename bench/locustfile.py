"""Staging load test for Rearrange: the frontend's traffic mix plus a T&S banlist writer.

Run by `make load` (local replicas, bench/load.py) or by the `loadgen` service of
deploy/docker-compose.yml against the load balancer. Standalone:

    locust -f bench/locustfile.py --headless -u 20 -r 5 -t 60s --host http://127.0.0.1:8080

Environment:
  REARRANGE_TARGETS      comma-separated base URLs; each user sticks to one of them
                         (round robin), so replicas without a load balancer share the load.
                         Unset: locust's --host.
  REARRANGE_WRITE_TOKEN  a bearer token of REARRANGE_ADMIN_TOKENS for the T&S writer.
  REARRANGE_ADMIN_URL    the T&S writer's base URL: a control port, or a balancer's admin
                         server (the staging compose file's http://lb:8080). Unset: the
                         writer's target as above (a replica's control port serves both).
  LOAD_SEED              seed of the generated pages (default 7), so runs are comparable.
  LOAD_THINK_MS          a frontend user's think time between queries, 0 to this (default 5).

The mix (weights are the shares of rerank requests):
  query classes   commercial 30 %, ymyl 10 %, navigational 15 %, none 45 %
                  (routing sends commercial and ymyl to the `commercial` profile)
  SERP sizes      10 docs 55 %, 20 docs 25 %, 50 docs 12 %, 100 docs 8 %
  experiment unit user_id from 200,000 users per request; 5 % logged out (no unit)
  texts           15 % of pages carry ~80-word texts on their top 20 documents, about a
                  fifth of them near-copies of a document above (near_duplicates works)
  safe search     moderate 75 %, strict 15 %, off 10 %; regions RU/US/DE/FR or none
  documents       ads, young domains, grey-zone spam, adult scores, crowded hosts, and
                  hosts the writer bans and lifts while the test runs
The T&S writer (one user) adds bans with a TTL, lifts its own (an appeal) and looks URLs
up, every 0.5-2 s, through the admin API with its token. Pages are generated once at
start (400 of them) so generating load costs little CPU; only the user id changes per
request.
"""
from __future__ import annotations

import itertools
import json
import os
import random
from dataclasses import dataclass

from locust import FastHttpUser, between, events, task

CLASSES = (("commercial", 30), ("ymyl", 10), ("navigational", 15), ("", 45))
SIZES = ((10, 55), (20, 25), (50, 12), (100, 8))
AGE_MODES = (("moderate", 75), ("strict", 15), ("off", 10))
REGIONS = (("RU", 40), ("US", 20), ("DE", 15), ("FR", 10), (None, 15))
TEXT_SHARE = 0.15
LOGGED_OUT_SHARE = 0.05
USERS = 200_000
PAGES = 400
UNIT = "@@UNIT@@"  # replaced per request by a user id of the same length

ORGANIC = ("en.wikipedia.org", "ru.wikipedia.org", "stackoverflow.com", "github.com",
           "docs.python.org", "habr.com", "www.reddit.com", "medium.com", "www.youtube.com",
           "news.ycombinator.com", "www.bbc.co.uk", "lenta.ru", "www.nhs.uk", "www.who.int",
           "www.mayoclinic.org", "market.yandex.ru", "www.ozon.ru", "www.amazon.com",
           "www.ebay.com", "www.avito.ru", "shop.example.com", "blog.example.org")
YOUNG = ("cheap-sofas.example", "best-deals-2026.example", "pills-online.example",
         "crypto-bonus.example")
ADULT = ("adult-tube.example", "nsfw.example.net")
# Hosts the writer bans and lifts: they appear on pages, so bans change real results.
VOLATILE = tuple(f"spam-{n}.volatile.example" for n in range(40))
WORDS = ("sofa", "price", "review", "buy", "cheap", "delivery", "health", "symptom", "doctor",
         "python", "error", "install", "news", "today", "official", "site", "login", "best",
         "guide", "how", "to", "compare", "model", "warranty", "store", "near", "me", "open")


def weighted(rng: random.Random, table: tuple) -> object:
    values, weights = zip(*table, strict=True)
    return rng.choices(values, weights)[0]


def text_of(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def near_copy(rng: random.Random, text: str) -> str:
    """The same text with one word changed: containment well above the 0.5 threshold."""
    words = text.split()
    words[rng.randrange(len(words))] = rng.choice(WORDS)
    return " ".join(words)


def make_document(rng: random.Random, i: int, score: float) -> dict:
    roll = rng.random()
    if roll < 0.06:
        host, age = rng.choice(YOUNG), rng.uniform(5, 200)
    elif roll < 0.09:
        host, age = rng.choice(ADULT), rng.uniform(500, 4000)
    elif roll < 0.13:
        host, age = rng.choice(VOLATILE), rng.uniform(30, 900)
    else:
        host, age = rng.choice(ORGANIC), rng.uniform(1000, 9000)
    doc: dict = {"id": f"d{i}", "url": f"https://{host}/{rng.choice(WORDS)}/{i}",
                 "score": round(score, 3), "domain_age_days": round(age)}
    spam = rng.random()
    doc["spam_score"] = round(rng.uniform(0.3, 0.9) if spam < 0.1 else
                              rng.uniform(0.96, 1.0) if spam < 0.12 else rng.uniform(0, 0.3), 3)
    doc["adult_score"] = round(rng.uniform(0.85, 1.0) if host in ADULT else
                               rng.uniform(0, 0.2), 3)
    if rng.random() < 0.08:
        doc["is_ad"] = True
    if rng.random() < 0.5:
        doc["factors"] = {"text": round(rng.uniform(0, 3), 2), "link": round(rng.uniform(0, 3), 2),
                          "behav": round(rng.uniform(0, 2), 2)}
    if rng.random() < 0.03:
        doc["blocked_regions"] = ["DE"]
    return doc


@dataclass(frozen=True, slots=True)
class Page:
    """A prepared request body; `unit` tells whether it carries the user id placeholder."""

    name: str
    body: bytes
    unit: bool


def make_page(rng: random.Random, n: int) -> Page:
    size = weighted(rng, SIZES)
    cls = weighted(rng, CLASSES)
    docs = [make_document(rng, i, 100 - i * 0.7 + rng.uniform(-0.3, 0.3)) for i in range(size)]
    with_text = rng.random() < TEXT_SHARE
    if with_text:
        texts: list[str] = []
        for doc in docs[:20]:
            text = (near_copy(rng, rng.choice(texts)) if texts and rng.random() < 0.2
                    else text_of(rng, rng.randint(60, 100)))
            texts.append(text)
            doc["text"] = text
    query: dict = {"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))),
                   "classes": [cls] if cls else [], "age_mode": weighted(rng, AGE_MODES)}
    region = weighted(rng, REGIONS)
    if region:
        query["region"] = region
    body: dict = {"request_id": f"load-{n}", "query": query, "documents": docs}
    unit = rng.random() >= LOGGED_OUT_SHARE
    if unit:
        body["unit"] = {"user_id": UNIT}
    name = f"/v1/rerank {size} docs" + (" +text" if with_text else "")
    return Page(name, json.dumps(body, ensure_ascii=False).encode(), unit)


def request_body(page: Page, user: int) -> bytes:
    """The page's body as a frontend sends it: the unit placeholder filled with a user id."""
    if not page.unit:
        return page.body
    return page.body.replace(UNIT.encode(), f"u-{user:05d}".encode(), 1)


PAGES_BUILT = [make_page(random.Random(f"{os.environ.get('LOAD_SEED', '7')}:{n}"), n)
               for n in range(PAGES)]
TARGETS = [t.strip().rstrip("/") for t in os.environ.get("REARRANGE_TARGETS", "").split(",")
           if t.strip()]
_next_target = itertools.count()
ADMIN_URL = os.environ.get("REARRANGE_ADMIN_URL", "").strip().rstrip("/")
JSON = {"content-type": "application/json"}


class TargetedUser(FastHttpUser):
    """Sticks to one of REARRANGE_TARGETS (round robin over users) when it is set."""

    abstract = True

    def __init__(self, environment) -> None:
        target = self.target()
        if target:
            self.host = target
        super().__init__(environment)

    def target(self) -> str | None:
        """This user's base URL; None: locust's --host."""
        return TARGETS[next(_next_target) % len(TARGETS)] if TARGETS else None


class Frontend(TargetedUser):
    """The search frontend: one rerank per query, little think time between queries."""

    weight = 20
    # Near-saturation with few users: a frontend fleet sends a new query as soon as one is
    # answered. LOAD_THINK_MS raises the think time for an open, lighter load.
    wait_time = between(0.0, float(os.environ.get("LOAD_THINK_MS", "5")) / 1000)

    @task
    def rerank(self) -> None:
        page = random.choice(PAGES_BUILT)
        body = request_body(page, random.randrange(USERS))
        with self.client.post("/v1/rerank", data=body, headers=JSON, name=page.name,
                              catch_response=True) as resp:
            if resp.status_code != 200:
                resp.failure(f"HTTP {resp.status_code}: {(resp.text or '')[:200]}")
            elif b'"documents"' not in (resp.content or b""):
                resp.failure("200 without documents")
            else:
                resp.success()


class TrustAndSafety(TargetedUser):
    """The T&S writer: bans volatile hosts with a TTL, lifts its own bans, looks URLs up."""

    fixed_count = 1
    wait_time = between(0.5, 2.0)

    def target(self) -> str | None:
        """The admin API's address when it is not the frontend's (REARRANGE_ADMIN_URL)."""
        return ADMIN_URL or super().target()

    def on_start(self) -> None:
        token = os.environ.get("REARRANGE_WRITE_TOKEN", "")
        self.auth = {**JSON, "authorization": f"Bearer {token}"}
        self.mine: list[str] = []
        self.rng = random.Random()
        self.ban()  # every writer session changes the banlist at least once

    def _check(self, resp, expected: int) -> dict | None:
        if resp.status_code != expected:
            hint = "" if os.environ.get("REARRANGE_WRITE_TOKEN") else \
                " (REARRANGE_WRITE_TOKEN is not set)"
            resp.failure(f"HTTP {resp.status_code}{hint}: {(resp.text or '')[:200]}")
            return None
        resp.success()
        return resp.json()

    @task(3)
    def ban(self) -> None:
        host = self.rng.choice(VOLATILE)
        scope = self.rng.choice(("host", "domain", "prefix", "url"))
        value = {"host": host, "domain": host, "prefix": f"{host}/{self.rng.choice(WORDS)}/",
                 "url": f"https://{host}/{self.rng.choice(WORDS)}/1"}[scope]
        body = {"scope": scope, "value": value, "reason": "load test: doorway pages",
                "ttl_seconds": self.rng.randint(30, 900)}
        if self.rng.random() < 0.2:
            body["regions"] = [self.rng.choice(("RU", "DE", "FR", "US"))]
        with self.client.post("/v1/banlist/entries", data=json.dumps(body).encode(),
                              headers=self.auth, name="/v1/banlist/entries [add]",
                              catch_response=True) as resp:
            got = self._check(resp, 201)
            if got is not None:
                self.mine.append(got["entry"]["id"])

    @task(2)
    def lift(self) -> None:
        if not self.mine:  # nothing of its own to lift yet: ban instead
            self.ban()
            return
        entry_id = self.mine.pop(self.rng.randrange(len(self.mine)))
        with self.client.request("DELETE", f"/v1/banlist/entries/{entry_id}",
                                 data=b'{"reason": "load test: appeal granted"}',
                                 headers=self.auth, name="/v1/banlist/entries/{id} [remove]",
                                 catch_response=True) as resp:
            if resp.status_code == 404:  # its TTL ran out first: expired, not an error
                resp.success()
            else:
                self._check(resp, 200)

    @task(1)
    def lookup(self) -> None:
        url = f"https://{self.rng.choice(VOLATILE)}/{self.rng.choice(WORDS)}/1"
        with self.client.get("/v1/banlist/lookup", params={"url": url},
                             name="/v1/banlist/lookup", catch_response=True) as resp:
            self._check(resp, 200)


@events.init.add_listener
def _describe(environment, **_: object) -> None:
    sizes = [p.name for p in PAGES_BUILT]
    print(f"locustfile: {len(PAGES_BUILT)} pages prepared "
          f"({sum('+text' in s for s in sizes)} with texts), "
          f"targets {TARGETS or [environment.host]}", flush=True)
