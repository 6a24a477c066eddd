"""What only the reference runner can show, its phases being plain data: why trim runs
after diversify."""
from __future__ import annotations

from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.config.pipeline import Step
from app.phases import Phase
from tests.helpers import doc, ids, make
from tests.reference.pipeline import Context, Pipeline
from tests.reference.rules.demotion import SpamDemotion
from tests.reference.rules.diversity import HostCrowding
from tests.reference.rules.filters import Banlist
from tests.reference.rules.labels import AdLabel
from tests.reference.rules.trim import Depth


def test_diversify_before_trim_keeps_candidates_that_trim_first_loses():
    # Seed 002 §16.1: [A, B(spam), C, D(banned), E]; A and C share a host; E is an ad.
    page = [doc("A", 10.0, host="shop.example", position=1),
            doc("B", 9.0, host="b.example", spam_score=0.9, position=2),
            doc("C", 8.0, host="shop.example", position=3),
            doc("D", 7.0, host="banned.example", position=4),
            doc("E", 6.0, host="e.example", is_ad=True, position=5)]
    ban = Entry("1", "domain", "banned.example", "legal removal", "tns", 0.0, None, frozenset())
    ctx = Context(banlist=BanIndex([ban]), input_count=5, now=1.0)
    phases = {
        Phase.PRE_FILTER: [Step(make(Banlist))],
        Phase.RERANK: [Step(make(SpamDemotion))],
        Phase.DIVERSIFY: [Step(make(HostCrowding, max_per_host=1))],
        Phase.TRIM: [Step(make(Depth, k=3))],
        Phase.ANNOTATE: [Step(make(AdLabel))],
    }
    right = Pipeline("right", [(p, phases[p]) for p in (
        Phase.PRE_FILTER, Phase.RERANK, Phase.DIVERSIFY, Phase.TRIM, Phase.ANNOTATE)])
    swapped = Pipeline("swapped", [(p, phases[p]) for p in (
        Phase.PRE_FILTER, Phase.RERANK, Phase.TRIM, Phase.DIVERSIFY, Phase.ANNOTATE)])
    assert ids(right.run(page, ctx).docs) == ["A", "E", "B"]
    # Trim first cuts [A, C, E, B] to [A, C, E]; collapsing C then leaves two results:
    # B was a candidate to fill the page but trim had already thrown it away.
    assert ids(swapped.run(page, ctx).docs) == ["A", "E"]
