"""The benchmarks' pages and banlists, generated from a seed (no test code: the PGO training
run, `bench.pgo`, uses them where the tests are not installed).

The page: documents on ~30 hosts (a few crowded, so host_crowding acts), scores descending,
spam and adult scores mostly low with a few in the grey zone and a few over the ban
thresholds, some young domains, some ads, and a few URLs that `write_banlist`'s entries
match. Texts (for near_duplicates) only when asked for.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class Host:
    """A site of the page: how often it ranks, how old it is, what it is about."""

    name: str
    weight: float
    age_days: float
    topics: tuple[str, ...]
    grey_spam: bool = False  # spam_score in the demotion zone (0.3 to 0.8)


# Organic hosts; a few are crowded (host_crowding keeps 2 per host) and a few share a
# registrable domain (wikipedia.org, reddit.com, python.org).
HOSTS: tuple[Host, ...] = (
    Host("en.wikipedia.org", 6, 8400, ("reference",)),
    Host("de.wikipedia.org", 2, 8400, ("reference",)),
    Host("stackoverflow.com", 7, 5800, ("q&a", "programming")),
    Host("github.com", 4, 6200, ("programming",)),
    Host("docs.python.org", 6, 9100, ("python", "reference")),
    Host("www.python.org", 2, 9100, ("python",)),
    Host("pypi.org", 2, 2900, ("python",)),
    Host("realpython.com", 4, 3600, ("python", "tutorial")),
    Host("www.reddit.com", 3, 7100, ("forum",)),
    Host("old.reddit.com", 1, 7100, ("forum",)),
    Host("medium.com", 3, 4200, ("blog",)),
    Host("dev.to", 2, 2600, ("blog", "programming")),
    Host("www.geeksforgeeks.org", 3, 5300, ("tutorial",)),
    Host("www.w3schools.com", 2, 8700, ("tutorial",)),
    Host("news.ycombinator.com", 1, 6300, ("news",)),
    Host("www.youtube.com", 2, 7300, ("video",)),
    Host("blog.jetbrains.com", 1, 7000, ("blog",)),
    Host("www.datacamp.com", 1, 4100, ("tutorial",)),
    Host("towardsdatascience.com", 2, 3000, ("blog", "data")),
    Host("www.tutorialspoint.com", 1, 6100, ("tutorial",)),
    Host("habr.com", 1, 6400, ("blog",)),
    Host("docs.djangoproject.com", 1, 6000, ("python", "reference")),
    Host("forum.example.org", 1, 2200, ("forum",)),
    Host("pytips-2025.example", 1, 40, ("python",)),
    Host("learn-code-fast.example", 1, 95, ("tutorial",), grey_spam=True),
    Host("top10-python-ides.example", 1, 300, ("shopping",), grey_spam=True),
)
SPAM_HOST = Host("best-python-deals.example", 0, 15, ("shopping",))  # spam_score > 0.95
ADULT_HOST = Host("adult-tube.example", 0, 2500, ("adult",))  # adult_score > 0.8

# Pages the banlist below removes; `{i}` keeps their URLs unique.
BANNED_URLS: tuple[str, ...] = (
    "https://casino-bonus.example/python-slots-{i}",
    "https://mirror.leaked-docs.example/docs/{i}.html",
    "https://forum.example.org/leaks/thread-{i}",
    "https://medium.com/@copycat/stolen-tutorial",  # the URL ban matches one page only
    "https://cdn.casino-bonus.example/landing/{i}",
)
MATCHING_BANS: tuple[dict[str, Any], ...] = (
    {"scope": "domain", "value": "casino-bonus.example", "reason": "gambling spam network"},
    {"scope": "host", "value": "mirror.leaked-docs.example", "reason": "copyright (DMCA)"},
    {"scope": "prefix", "value": "forum.example.org/leaks/", "reason": "legal removal",
     "regions": ["DE", "FR"]},
    {"scope": "url", "value": "https://medium.com/@copycat/stolen-tutorial",
     "reason": "court order"},
)
SLUG_WORDS = ("python", "list", "comprehension", "performance", "loop", "speed", "map",
              "generator", "filter", "vs", "faster", "guide", "tips", "benchmark", "tutorial")
QUERY = {"text": "python list comprehension performance", "classes": ["informational"],
         "region": "DE", "age_mode": "moderate"}


@dataclass(slots=True)
class Plan:
    """Which positions of the page get a special document."""

    banned: list[int]
    spam: list[int]
    adult: list[int]
    ads: set[int]
    blocked: set[int]
    copies: list[int]


def plan_page(n: int, rng: random.Random) -> Plan:
    """Spread the special documents over the page; counts grow with n, at least one each."""
    banned_n, spam_n, adult_n = max(1, n // 25), max(1, n // 50), max(1, n // 40)
    specials = rng.sample(range(n), min(n, banned_n + spam_n + adult_n))
    top = range(min(n, max(3, n // 10)))
    return Plan(
        banned=specials[:banned_n],
        spam=specials[banned_n:banned_n + spam_n],
        adult=specials[banned_n + spam_n:],
        ads=set(rng.sample(top, min(len(top), max(1, n // 33)))),
        blocked=set(rng.sample(range(n), max(1, n // 50))),
        copies=rng.sample(range(1, n), max(1, n // 12)) if n > 1 else [],
    )


def spam_score(rng: random.Random, host: Host) -> float:
    """Mostly low; grey-zone hosts and a few stray pages between 0.3 and 0.85."""
    if host is SPAM_HOST:
        return round(rng.uniform(0.955, 0.995), 3)
    if host.grey_spam or rng.random() < 0.03:
        return round(rng.uniform(0.35, 0.85), 3)
    return round(min(0.29, rng.expovariate(1 / 0.05)), 3)


def adult_score(rng: random.Random, host: Host) -> float:
    """0 for most pages; high on the adult host; a few mild ones that are only labelled."""
    if host is ADULT_HOST:
        return round(rng.uniform(0.85, 0.99), 3)
    return round(rng.uniform(0.5, 0.75), 3) if rng.random() < 0.02 else 0.0


def factors(rng: random.Random, score: float) -> dict[str, float]:
    """The score split into the four factor blocks in random proportions."""
    weights = {k: rng.random() + 0.2 for k in ("text", "link", "behav", "quality")}
    total = sum(weights.values())
    return {k: round(score * w / total, 4) for k, w in weights.items()}


def url_on(rng: random.Random, host: Host, i: int) -> str:
    slug = "-".join(rng.sample(SLUG_WORDS, 3))
    query = f"?page={rng.randint(2, 5)}" if rng.random() < 0.1 else ""
    return f"https://{host.name}/{rng.choice(('a', 'q', 'blog', 'wiki', 'docs'))}/{slug}-{i}{query}"


def banned_url(k: int, position: int) -> str:
    """The k-th banned page: each ban in turn once, then those that match many pages again."""
    if k < len(BANNED_URLS):
        return BANNED_URLS[k].format(i=position)
    repeatable = [url for url in BANNED_URLS if "{i}" in url]
    return repeatable[k % len(repeatable)].format(i=position)


def make_document(rng: random.Random, i: int, score: float, plan: Plan,
                  banned_url: str | None) -> dict[str, Any]:
    """One document of the ranker's page (no text; see add_texts)."""
    if i in plan.spam:
        host = SPAM_HOST
    elif i in plan.adult:
        host = ADULT_HOST
    else:
        host = rng.choices(HOSTS, weights=[h.weight for h in HOSTS])[0]
    doc: dict[str, Any] = {
        "id": f"{rng.getrandbits(64):016x}",
        "url": banned_url or url_on(rng, host, i),
        "score": score,
        "factors": factors(rng, score),
        "spam_score": spam_score(rng, host),
        "adult_score": adult_score(rng, host),
        "topics": list(host.topics),
    }
    if rng.random() > 0.05:  # a few pages come without a known domain age
        doc["domain_age_days"] = host.age_days
    if i in plan.ads:
        doc["is_ad"] = True
    if i in plan.blocked:
        doc["blocked_regions"] = ["DE"]
    return doc


def make_serp(n: int, seed: int, user_id: str, with_text: bool) -> dict[str, Any]:
    """A deterministic request body of n documents in the ranker's order."""
    rng = random.Random(f"{seed}:{n}")
    plan = plan_page(n, rng)
    scores = sorted((round(rng.lognormvariate(1.5, 0.6), 4) for _ in range(n)), reverse=True)
    banned_urls = {pos: banned_url(k, pos) for k, pos in enumerate(plan.banned)}
    docs = [make_document(rng, i, scores[i], plan, banned_urls.get(i)) for i in range(n)]
    if with_text:
        add_texts(rng, docs, plan.copies)
    return {"request_id": f"bench-{seed}-{n}", "query": dict(QUERY),
            "unit": {"user_id": user_id}, "documents": docs}


def add_texts(rng: random.Random, docs: list[dict[str, Any]], copies: Sequence[int]) -> None:
    """~300 words a page: a per-host header and Zipf-distributed words; some pages copy an
    earlier one with ~2% of the words changed (scrapers), so near_duplicates folds them."""
    vocab = [_word(rng) for _ in range(3000)]
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    headers: dict[str, list[str]] = {}
    for doc in docs:
        host = doc["url"].split("/")[2]
        header = headers.setdefault(host, rng.choices(vocab, weights, k=30))
        doc["text"] = " ".join(header + rng.choices(vocab, weights, k=270))
    for i in copies:
        words = docs[rng.randrange(i)]["text"].split()
        for k in rng.sample(range(len(words)), len(words) // 50):
            words[k] = rng.choice(vocab)
        docs[i]["text"] = " ".join(words)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou")
                   for _ in range(rng.randint(1, 4)))


# --- the service ---------------------------------------------------------------------------


def write_banlist(path: Path, n: int, seed: int) -> int:
    """n generated host/domain entries plus the few that match the page; returns the count."""
    rng = random.Random(f"banlist:{seed}")
    tlds = ("com", "net", "org", "info", "biz", "xyz", "ru", "de")
    reasons = ("link farm (manual action)", "serves malware", "phishing", "scraped content",
               "doorway pages")
    lines = []
    for i in range(n):
        name = f"{_word(rng)}-{_word(rng)}-{i}.{rng.choice(tlds)}"
        scope = "domain" if i % 2 else "host"
        value = name if scope == "domain" else f"{rng.choice(('www', 'cdn', 'm'))}.{name}"
        lines.append(orjson.dumps({"scope": scope, "value": value,
                                   "reason": rng.choice(reasons)}))
    lines.extend(orjson.dumps(entry) for entry in MATCHING_BANS)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return len(lines)
