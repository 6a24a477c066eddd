"""Benchmark: URL canonicalization, the engine (Rust) against ada, a WHATWG URL parser in C++.

A page of `--urls` (default 100) result URLs in a realistic mix: mostly clean https URLs
with a path and a query, then mixed case and ports, fragments, percent-escapes and
dot segments, IDN hosts, IPs, userinfo and backslashes. Each round canonicalizes the page
with every function below, interleaved with the order rotated each round; medians per
page and their ratios are the figures (nothing here asserts a time).

  engine     app.banlist.canon.canonicalize_with_host (crates/engine/src/url.rs)
  ada        ada_url.parse_url (the parser Node.js uses): parsing alone, without Safe
             Browsing's canonical form or the registrable host, from Python
  dict       one dict probe per URL: what a hit of the former remembered-URL cache cost

Run from the repository root: `python -m bench.canon [--urls N] [--rounds N]`.
"""
from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import ada_url

from app.banlist import canon

MESSY = [
    "HTTPS://News.Example.COM:443/World/Story.html?id={n}#comments",
    "http://shop{n}.example.com/a/./b/../item?ref=serp&utm_source=x",
    "https://www.example.org/search?q=sofa%20bed&p={n}",
    "https://пример.рф/каталог/{n}",
    "https://www.bücher.de/b/{n}",
    "http://195.127.0.11/uploads/{n}/",
    "https://user:pw@forum.example.net/t/{n}",
    "https://blog.example.com/2024/05/post-%E2%9C%93-{n}/",
    "http://evil.example\\@good.example/{n}",
    "https://m.example.co.uk//double//slash/{n}",
]


def page(n: int, rng: random.Random) -> list[str]:
    """Four in five clean, the rest drawn from the messy spellings."""
    urls = []
    for i in range(n):
        if rng.random() < 0.8:
            urls.append(f"https://site{rng.randrange(10**5)}.example.com/cat/item-"
                        f"{rng.randrange(10**6)}?ref=serp&pos={i}")
        else:
            urls.append(rng.choice(MESSY).format(n=rng.randrange(10**6)))
    return urls


def ada_host(url: str) -> str | None:
    """The host ada opens the URL with, without its trailing dot; None if it opens none."""
    try:
        return ada_url.parse_url(url)["hostname"].rstrip(".") or None
    except ValueError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    urls = page(args.urls, random.Random(14))
    remembered = {u: canon.canonicalize_with_host(u) for u in urls}
    agree = sum(canon.canonicalize_with_host(u)[1] == ada_host(u) for u in urls)

    def each(fn: Callable[[str], object]) -> Callable[[], None]:
        def run() -> None:
            for u in urls:
                fn(u)
        return run

    fns = [("engine", each(canon.canonicalize_with_host)),
           ("ada", each(ada_url.parse_url)),
           ("dict", each(remembered.__getitem__))]
    times: dict[str, list[int]] = {name: [] for name, _ in fns}
    for r in range(args.rounds):
        for name, fn in fns[r % 3:] + fns[:r % 3]:
            started = time.perf_counter_ns()
            fn()
            times[name].append(time.perf_counter_ns() - started)
    med = {k: statistics.median(v) / 1000 for k, v in times.items()}
    print(f"canonicalize_with_host on a page of {args.urls} URLs ({agree} with ada's host), "
          f"{args.rounds} interleaved rounds, median per page:")
    for name, _ in fns:
        print(f"  {name:<10} {med[name]:9.1f} µs  ({med[name] * 1000 / args.urls:6.0f} ns/URL)")
    print(f"  ratio engine/ada: {med['engine'] / med['ada']:.2f}x; "
          f"engine/dict: {med['engine'] / med['dict']:.2f}x")


if __name__ == "__main__":
    main()
