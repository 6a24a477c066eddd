"""Clusters that cannot chain (app/neardup/cluster.py), on plain sets and on a whole site."""
from __future__ import annotations

import random

import numpy as np
import pytest

from app.neardup import dupes
from app.neardup.cluster import MIN_PART, clusters, disjoint_parts
from app.neardup.report import template_runs
from app.neardup.verdict import verdicts
from tests.corpus import audit_site, mixed_site, reworded_site, vocabulary


def shared_of(sets: list[set[int]]):
    """`shared` over plain sets: for page i, which of its (sorted) shingles others hold."""
    def shared(i: int, others: np.ndarray) -> np.ndarray:
        mine = sorted(sets[i])
        return np.array([[x in sets[o] for x in mine] for o in others.tolist()], dtype=bool)
    return shared


def pairs_of(sets: list[set[int]], threshold: float = 0.5):
    """(linked, contained) pairs as app/neardup/dupes.py cuts them, from plain sets."""
    linked, contained = [], []
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            both = len(sets[i] & sets[j])
            small, large = sorted((len(sets[i]), len(sets[j])))
            if both >= threshold * large:
                linked.append((i, j, both))
            if both >= threshold * small:
                contained.append((i, j, both))
    def arrays(found: list[tuple[int, int, int]]) -> tuple[np.ndarray, ...]:
        return tuple(np.array([f[k] for f in found], dtype=np.int64) for k in range(3))
    return arrays(linked), arrays(contained)


def test_a_page_made_of_two_others_has_disjoint_parts():
    a, b = set(range(0, 40)), set(range(100, 140))
    both = set(range(10, 40)) | set(range(100, 130))  # 30 of a, 30 of b
    twin = set(range(5, 40))  # another page of a's template
    sets = [a, b, both, twin]
    shared = shared_of(sets)
    sizes = np.array([len(s) for s in sets])
    parts, covered = disjoint_parts(2, 60, np.array([0, 1, 3]), np.array([30, 30, 30]), shared)
    assert parts == [0, 1] and covered == 1.0
    # a's page shares one part (its template) with the mixed page and its twin
    parts, covered = disjoint_parts(0, 40, np.array([2, 3]), np.array([30, 35]), shared)
    assert parts == [3] and covered == 35 / 40
    # a part under MIN_PART shingles does not count
    tiny = set(range(200, 200 + MIN_PART - 1))
    sets = [a | tiny, tiny, twin]
    assert disjoint_parts(0, 49, np.array([1, 2]), np.array([MIN_PART - 1, 35]),
                          shared_of(sets))[0] == [2]
    assert sizes.tolist() == [40, 40, 60, 35]


def test_a_bridge_page_neither_leads_nor_joins():
    # pages 0-2 one template, 3-5 another, 6 holds parts of both and matches all six
    t1, t2 = set(range(0, 50)), set(range(1000, 1050))
    sets = [t1 | {90 + i} for i in range(3)] + [t2 | {990 + i} for i in range(3)]
    sets.append(set(range(10, 50)) | set(range(1010, 1050)))
    linked, contained = pairs_of(sets)
    sizes = np.array([len(s) for s in sets])
    found, multi = clusters(7, linked, contained, sizes, 0.5, shared_of(sets))
    assert sorted(c.members for c in found) == [[0, 1, 2], [3, 4, 5]]
    assert [(m.page, sorted(m.parts)) for m in multi] == [(6, [0, 3])]
    assert multi[0].covered == 1.0
    # every member's own text is the template, all but the one word of its own
    assert all(np.allclose(c.shares, 50 / 51) for c in found)


def test_a_short_page_inside_long_ones_clusters_none_of_them():
    # a 12-shingle notice quoted whole by four long unrelated pages: containment 1.0 of
    # the notice in each, 12 % of each long page
    notice = set(range(12))
    sets = [notice] + [notice | set(range(1000 * k, 1000 * k + 88)) for k in range(1, 5)]
    linked, contained = pairs_of(sets)
    assert len(contained[0]) == 4 and len(linked[0]) == 0
    found, multi = clusters(5, linked, contained, np.array([len(s) for s in sets]), 0.5,
                            shared_of(sets))
    assert found == [] and multi == []


def test_pages_made_mostly_of_a_template_cluster_and_pages_a_third_of_it_do_not():
    body = set(range(100))
    sets = [body | set(range(1000 * k, 1000 * k + 30)) for k in range(1, 5)]  # 77 % template
    sets += [set(range(60)) | set(range(5000 * k, 5000 * k + 120)) for k in (1, 2)]  # 33 %
    linked, contained = pairs_of(sets)
    found, _ = clusters(len(sets), linked, contained, np.array([len(s) for s in sets]), 0.5,
                        shared_of(sets))
    [cluster] = found
    assert cluster.members == [0, 1, 2, 3]
    assert np.allclose(cluster.shares, 100 / 130)


def test_the_audit_sorts_out_a_site():
    site, truth = audit_site()
    with dupes.audit(site, method="exact") as result:
        urls = result.urls
        found = sorted(sorted(urls[i] for i in c.members) for c in result.clusters)
        assert found == sorted(sorted(f) for f in truth["families"])  # recall and precision 1
        assert sorted(urls[m.page] for m in result.multi) == sorted(truth["bridges"])
        blocks = sorted(sorted(urls[p] for p in b.pages) for b in result.blocks)
        assert blocks == sorted(truth["blocks"])
        for block in result.blocks:
            quoted = block.shares[[urls[p] != "/includes/notice" for p in block.pages]]
            assert ((quoted > 0.05) & (quoted < 0.12)).all()  # 40 of about 440 words
        v = verdicts(result)
        advice = dict(zip(urls, v.recommendation, strict=True))
        target = {u: urls[t] for u, t in zip(urls, v.target, strict=True) if t >= 0}
        assert advice["/includes/notice"] == "noindex"
        assert advice["/thin"] == "merge" and target["/thin"] == truth["merge"]["/thin"]
        for copy, original in truth["copies"].items():
            assert advice[copy] == "canonical" and target[copy] == original
            assert advice[original] == "rewrite"  # 3 words of 300 its own: still a template
        for family in truth["families"]:
            assert {advice[u] for u in family} <= {"rewrite", "canonical"}
        assert {advice[u] for u in truth["bridges"]} == {"noindex"}
        quoting = [u for block in truth["blocks"] for u in block if u != "/includes/notice"]
        assert {advice[u] for u in quoting} == {"ok"}
        assert {advice[u] for u in urls if u.startswith("/u/")} == {"ok"}
        last = urls[-11:-2]  # unique pages, not /u/299 that /thin is part of
        assert all(v.unique_share[urls.index(u)] == 1.0 for u in last)


@pytest.mark.parametrize("method", ["auto", "exact"])
def test_forty_templates_and_forty_mixed_pages_make_forty_clusters(method):
    site = mixed_site(templates=40, pages=50)
    with dupes.audit(site, method=method) as result:  # 2,040 pages: auto takes MinHash LSH
        assert result.method == ("minhash" if method == "auto" else "exact")
        assert len(result.clusters) == 40
        for cluster in result.clusters:
            urls = {result.urls[i] for i in cluster.members}
            assert len(urls) == 50 and len({u.split("/")[1] for u in urls}) == 1
            # the shared text is the template's body, not one page's own words
            assert sum(len(run.split()) for run in template_runs(result, cluster)) >= 250
        multi = sorted(result.urls[m.page] for m in result.multi)
        assert multi == sorted(f"/mixed/{t}" for t in range(40))
        for m in result.multi:
            t = int(result.urls[m.page].split("/")[2])
            owners = {result.urls[p].split("/")[1] for p in m.parts}
            assert owners == {f"t{t}", f"t{(t + 1) % 40}"}


def test_an_index_holding_every_page_is_multi_template_not_a_bridge():
    site = mixed_site(templates=10, pages=20)[:200]  # no mixed pages this time
    book = " ".join(text for url, text in site if url.endswith("/p0"))  # print.html
    with dupes.audit([*site, ("/print.html", book)], method="exact") as result:
        assert len(result.clusters) == 10
        assert all(len(c.members) == 20 for c in result.clusters)
        [index] = result.multi
        assert result.urls[index.page] == "/print.html" and len(index.parts) == 10


def test_bridges_stay_out_of_clusters_on_a_large_site():
    # 40 templates x 50 pages, 40 bridges and 18,000 unique pages: MinHash LSH proposes
    # the pairs, and every bridge is still found (no sample of its pages to miss it)
    rng = random.Random(9)
    vocab = vocabulary(seed=9)
    site = mixed_site(templates=40, pages=50)
    site += [(f"/u/{i}", " ".join(rng.choices(vocab, k=300))) for i in range(18_000)]
    with dupes.audit(site) as result:
        assert result.method == "minhash"
        families = [{result.urls[i].split("/")[1] for i in c.members} for c in result.clusters]
        assert len(families) == 40 and all(len(f) == 1 for f in families)
        assert all(len(c.members) == 50 for c in result.clusters)
        assert sorted(result.urls[m.page] for m in result.multi) == sorted(
            f"/mixed/{t}" for t in range(40))


def pair_recall(result, families: list[list[str]]) -> float:
    """The share of the pairs of one family's pages that one cluster holds."""
    of = {result.urls[i]: n for n, c in enumerate(result.clusters) for i in c.members}
    pairs = [(a, b) for f in families for i, a in enumerate(f) for b in f[i + 1:]]
    return sum(1 for a, b in pairs if a in of and of[a] == of.get(b)) / len(pairs)


@pytest.mark.parametrize(("templates", "pages", "unique", "method"), [
    (12, 10, 1000, "exact"), (12, 10, 6000, "minhash"),
    (2, 150, 3000, "minhash"),  # each template's words in 5 % of the pages
])
def test_reworded_templates_are_found_and_no_unique_page_clustered(templates, pages, unique,
                                                                   method):
    site, families = reworded_site(templates=templates, pages=pages, unique=unique)
    with dupes.audit(site) as plain:  # ten-word shingles cannot see them
        assert pair_recall(plain, families) < 0.1
    with dupes.audit(site, reworded=True, threshold=dupes.REWORDED_THRESHOLD) as result:
        assert result.method == method
        assert pair_recall(result, families) >= 0.9
        clustered = {result.urls[i] for c in result.clusters for i in c.members}
        assert not {u for u in clustered if u.startswith("/u/")}
        family_of = {u: n for n, f in enumerate(families) for u in f}
        for c in result.clusters:  # and no cluster mixes two templates
            assert len({family_of[result.urls[i]] for i in c.members}) == 1


def test_an_index_of_every_page_hides_neither_bridges_nor_verdicts():
    # print.html holds every page: it is the pages' largest container, but it is found to
    # hold several templates first, so it stands for none of them
    site, truth = audit_site()
    book = " ".join(text for _, text in site)
    with dupes.audit([*site, ("/print.html", book)], method="exact") as result:
        urls = result.urls
        multi = sorted(urls[m.page] for m in result.multi)
        assert multi == sorted([*truth["bridges"], "/print.html"])
        v = verdicts(result)
        advice = dict(zip(urls, v.recommendation, strict=True))
        assert advice["/print.html"] == "noindex"
        assert "/print.html" not in {urls[t] for t in v.target if t >= 0}
        assert {advice[u] for u in urls if u.startswith("/u/")} == {"ok"}
        for copy, original in truth["copies"].items():
            assert advice[copy] == "canonical" and advice[original] == "rewrite"
