"""A generated corpus of templated pages for the near-duplicate tests and benchmarks.

Pages are made from a vocabulary of random words: each template family shares a body
of `words` words, and each member keeps it except for a chosen share of edited
positions and, for some, an appended paragraph, so Jaccard and containment spread over
the whole [0, 1] range; singletons are unrelated pages.
"""
from __future__ import annotations

import itertools
import random


def vocabulary(size: int = 20_000, seed: int = 7) -> list[str]:
    """Random lowercase 'words' (Latin and Cyrillic), 3 to 9 letters."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyzабвгдежзиклмнопрстуфхцчшщэюя"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)]


def corpus(pages: int, seed: int = 1, words: int = 300, family_share: float = 0.5,
           family_size: tuple[int, int] = (2, 12)) -> list[tuple[str, str]]:
    """(url, text) pairs: about family_share of the pages in template families."""
    rng = random.Random(seed)
    vocab = vocabulary()
    out: list[tuple[str, str]] = []
    family = 0
    while len(out) < pages:
        if rng.random() < family_share:
            body = rng.choices(vocab, k=words)
            for member in range(rng.randint(*family_size)):
                edited = list(body)
                for _ in range(int(words * rng.choice((0.0, 0.005, 0.01, 0.02, 0.04, 0.08)))):
                    edited[rng.randrange(words)] = rng.choice(vocab)
                if rng.random() < 0.3:
                    edited += rng.choices(vocab, k=rng.randint(20, words))
                out.append((f"/t{family}/p{member}", " ".join(edited)))
            family += 1
        else:
            out.append((f"/u/{len(out)}", " ".join(rng.choices(vocab, k=words))))
    return out[:pages]


def mixed_site(templates: int = 40, pages: int = 50, words: int = 300,
               seed: int = 3) -> list[tuple[str, str]]:
    """`templates` template bodies of `words` words with `pages` pages each (a few words of
    each page its own, as a city name), then one page per template t holding two thirds of
    t's body and two thirds of t+1's (a ring: every template touches two others)."""
    rng = random.Random(seed)
    vocab = vocabulary(seed=seed)
    bodies = [rng.choices(vocab, k=words) for _ in range(templates)]
    out: list[tuple[str, str]] = []
    for t, body in enumerate(bodies):
        for p in range(pages):
            page = list(body)
            for _ in range(3):
                page[rng.randrange(words)] = rng.choice(vocab)
            out.append((f"/t{t}/p{p}", " ".join(page)))
    third = words // 3
    for t in range(templates):
        a, b = bodies[t], bodies[(t + 1) % templates]
        out.append((f"/mixed/{t}", " ".join(a[:2 * third] + b[third:])))
    return out


def audit_site(templates: int = 8, pages: int = 12, unique: int = 300, words: int = 300,
               quoting: int = 30, seed: int = 5) -> tuple[list[tuple[str, str]], dict]:
    """A site an SEO audit should sort out, and what it should find (`truth`):

    - `templates` families of `pages` pages made from one body (3 words of each their own,
      as a city name): `truth["families"]`, each one cluster, every member `rewrite`;
    - one near copy of each family's first page (one word changed): `canonical`;
    - a page per template t holding two thirds of t's body and two thirds of t+1's
      (`truth["bridges"]`): in no cluster, reported as holding several templates;
    - a 40-word notice included in `quoting` unique pages (about a tenth of each) and
      saved as a page of its own (`/includes/notice`: `noindex`), and a 40-word
      disclaimer that `quoting` other unique pages quote with no page of its own: each a
      shared block (`truth["blocks"]`), none of those pages clustered;
    - a thin page, the first 150 words of a unique page (`truth["merge"]`: its target);
    - the rest unique pages: `ok`, in no cluster.
    """
    rng = random.Random(seed)
    vocab = vocabulary(seed=seed)
    out: list[tuple[str, str]] = []
    truth: dict = {"families": [], "bridges": [], "blocks": [], "merge": {}, "copies": {}}
    bodies = [rng.choices(vocab, k=words) for _ in range(templates)]
    for t, body in enumerate(bodies):
        family = []
        for p in range(pages):
            page = list(body)
            for _ in range(3):
                page[rng.randrange(words)] = rng.choice(vocab)
            family.append(f"/t{t}/p{p}")
            out.append((family[-1], " ".join(page)))
        copy = out[-pages][1].split()
        copy[words // 2] = rng.choice(vocab)
        out.append((f"/t{t}/copy", " ".join(copy)))
        family.append(f"/t{t}/copy")
        truth["families"].append(family)
        truth["copies"][f"/t{t}/copy"] = f"/t{t}/p0"
    third = words // 3
    for t in range(templates):
        a, b = bodies[t], bodies[(t + 1) % templates]
        out.append((f"/mixed/{t}", " ".join(a[:2 * third] + b[third:])))
        truth["bridges"].append(f"/mixed/{t}")
    for name, standalone in (("notice", True), ("disclaimer", False)):
        block = rng.choices(vocab, k=40)
        carriers = [f"/{name}/{i}" for i in range(quoting)]
        for url in carriers:
            text = rng.choices(vocab, k=400)
            at = rng.randrange(len(text))
            out.append((url, " ".join(text[:at] + block + text[at:])))
        if standalone:
            out.append(("/includes/notice", " ".join(block)))
            carriers.append("/includes/notice")
        truth["blocks"].append(sorted(carriers))
    for i in range(unique):
        out.append((f"/u/{i}", " ".join(rng.choices(vocab, k=400))))
    out.append(("/thin", " ".join(out[-1][1].split()[:150])))
    truth["merge"]["/thin"] = out[-2][0]
    return out, truth


def zipf_text(rng: random.Random, vocab: list[str], cum_weights: list[float],
              sentences: int) -> list[list[str]]:
    """Sentences of 8 to 20 words drawn as a language draws them: a few words very often."""
    return [rng.choices(vocab, cum_weights=cum_weights, k=rng.randint(8, 20))
            for _ in range(sentences)]


def reworded_site(templates: int = 12, pages: int = 10, unique: int = 1000,
                  sentences: int = 20, swapped: float = 1 / 3,
                  seed: int = 11) -> tuple[list[tuple[str, str]], list[list[str]]]:
    """Pages rewritten from templates as a language model rewrites: each page of a family
    has its template's sentences in a new order and `swapped` of its words replaced by one
    of three synonyms of each; and `unique` unrelated pages in the same language (words
    drawn by Zipf's law, so every page shares its common words with every other). The
    pages and the families (the truth)."""
    rng = random.Random(seed)
    vocab = vocabulary(size=30_000, seed=seed)
    weights = list(itertools.accumulate(1 / rank for rank in range(1, len(vocab) + 1)))
    synonyms = {w: rng.sample(vocab, 3) for w in vocab}
    out: list[tuple[str, str]] = []
    families = []
    for t in range(templates):
        body = zipf_text(rng, vocab, weights, sentences)
        family = []
        for p in range(pages):
            order = rng.sample(body, len(body))
            text = ". ".join(" ".join(rng.choice(synonyms[w]) if rng.random() < swapped else w
                                      for w in sentence) for sentence in order)
            family.append(f"/r{t}/p{p}")
            out.append((family[-1], text + "."))
        families.append(family)
    for i in range(unique):
        out.append((f"/u/{i}", ". ".join(" ".join(s) for s in
                                         zipf_text(rng, vocab, weights, sentences)) + "."))
    rng.shuffle(out)
    return out, families
