"""Clusters that cannot chain (app/neardup/cluster.py), on plain sets and on a whole site."""
from __future__ import annotations

import numpy as np
import pytest

from app.neardup import dupes
from app.neardup.cluster import MIN_PART, clusters, disjoint_parts
from app.neardup.report import template_runs
from tests.corpus import mixed_site


def shared_of(sets: list[set[int]]):
    """`shared` over plain sets: for page i, which of its (sorted) shingles others hold."""
    def shared(i: int, others: np.ndarray) -> np.ndarray:
        mine = sorted(sets[i])
        return np.array([[x in sets[o] for x in mine] for o in others.tolist()], dtype=bool)
    return shared


def test_a_page_made_of_two_others_has_disjoint_parts():
    a, b = set(range(0, 40)), set(range(100, 140))
    both = set(range(10, 40)) | set(range(100, 130))  # 30 of a, 30 of b
    twin = set(range(5, 40))  # another page of a's template
    sets = [a, b, both, twin]
    shared = shared_of(sets)
    assert disjoint_parts(2, np.array([0, 1, 3]), shared) == [0, 1]
    # a's page shares one part (its template) with the mixed page and its twin
    assert disjoint_parts(0, np.array([2, 3]), shared) == []
    # a part under MIN_PART shingles does not count
    tiny = set(range(200, 200 + MIN_PART - 1))
    sets = [a | tiny, tiny, twin]
    assert disjoint_parts(0, np.array([1, 2]), shared_of(sets)) == []


def test_a_bridge_page_neither_leads_nor_joins():
    # pages 0-2 one template, 3-5 another, 6 holds parts of both and matches all six
    t1, t2 = set(range(0, 50)), set(range(1000, 1050))
    sets = [t1 | {90 + i} for i in range(3)] + [t2 | {990 + i} for i in range(3)]
    sets.append(set(range(10, 50)) | set(range(1010, 1050)))
    pairs = [(i, j) for i in range(3) for j in range(i + 1, 3)]
    pairs += [(i, j) for i in range(3, 6) for j in range(i + 1, 6)]
    pairs += [(i, 6) for i in range(6)]
    a, b = (np.array(x) for x in zip(*pairs, strict=True))
    found, multi = clusters(7, a, b, shared_of(sets))
    assert sorted(c.members for c in found) == [[0, 1, 2], [3, 4, 5]]
    # with union-find the bridge would have made one cluster of all seven
    assert [(m.page, m.parts) for m in multi] == [(6, [0, 3])]


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
