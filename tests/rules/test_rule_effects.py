"""What the engine's metrics say each rule did: position moves and top-10 churn, applied
and in shadow, and action counts that are the audit's own tally."""
from __future__ import annotations

from collections import Counter
from typing import Any

import orjson

from app._engine import EngineMetrics
from app.banlist.index import BanIndex
from app.banlist.model import Entry
from app.config.load import load_bytes
from app.config.spec import with_core
from tests.config.test_pipeline import EXPERIMENT, SEED_CONFIG  # the same page and experiment

NOW = 1_900_000_000.0
BANS = BanIndex([Entry("1", "domain", "banned.example", "legal removal", "tns", 0.0, None,
                       frozenset())])


def document(id: str, score: float, host: str, **fields: Any) -> dict[str, Any]:
    return {"id": id, "url": f"https://{host}/{id}", "score": score, **fields}


def seed_page() -> list[dict[str, Any]]:
    """Seed 002 §16.1: [A, B(spam), C, D(banned), E]; A and C share a host; E is an ad."""
    return [document("A", 10.0, "shop.example"),
            document("B", 9.0, "b.example", spam_score=0.9),
            document("C", 8.0, "shop.example"),
            document("D", 7.0, "banned.example"),
            document("E", 6.0, "e.example", is_ad=True)]


def serve(config: str, documents: list[dict[str, Any]], metrics: EngineMetrics,
          variant: str | None = None, **query: Any) -> dict[str, Any]:
    core = with_core(load_bytes(config.encode()), metrics).core
    body = orjson.dumps({"documents": documents, "query": query})
    status, out, _, _, _ = core.rerank(body, banlist=BANS, now=NOW,
                                    forced={"antispam_v7": variant} if variant else None)
    assert status == 200, out
    return orjson.loads(out)


def position_changes(metrics: EngineMetrics, rule: str, mode: str) -> dict[str, tuple[int, float]]:
    """direction → (how many documents moved that way, by how many places in all)."""
    return {labels[2]: (sum(counts), total) for labels, counts, total
            in metrics.snapshot()["histograms"]["rearrange_rule_position_change"]
            if labels[:2] == (rule, mode)}


def churn(metrics: EngineMetrics, rule: str, mode: str) -> tuple[int, float]:
    """(rule calls observed, documents brought into the top 10 in all)."""
    [(counts, total)] = [(counts, total) for labels, counts, total
                         in metrics.snapshot()["histograms"]["rearrange_rule_top10_churn"]
                         if labels == (rule, mode)]
    return sum(counts), total


def test_shadow_measures_what_the_rule_would_have_done_without_touching_the_page():
    control, treated = EngineMetrics(), EngineMetrics()
    out = serve(SEED_CONFIG + EXPERIMENT, seed_page(), control, "control")
    # after the banlist: [A, B, C, E]; demoting B to 4.0 would sort it [A, C, E, B]:
    # C and E up one, B down two. The page served keeps B second.
    assert position_changes(control, "spam_demotion", "shadow") == {"up": (2, 2.0),
                                                                    "down": (1, 2.0)}
    assert churn(control, "spam_demotion", "shadow") == (1, 0.0)
    assert [(d["id"], d["score"]) for d in out["documents"]][:2] == [("A", 10.0), ("B", 9.0)]
    serve(SEED_CONFIG + EXPERIMENT, seed_page(), treated, "treatment")
    assert position_changes(treated, "spam_demotion", "applied") == {"up": (2, 2.0),
                                                                     "down": (1, 2.0)}
    assert position_changes(control, "banlist", "applied") == {"up": (1, 1.0)}  # E 5th to 4th
    assert churn(control, "banlist", "applied") == (1, 0.0)


def test_a_rule_after_a_shadow_rule_is_measured_on_the_page_it_was_given():
    """A shadow rule's output is dropped, so the rule after it must be judged as if the
    shadow rule had not run."""
    rerank = "    rerank: [spam_demotion]"
    both = SEED_CONFIG.replace(rerank, "    rerank: [spam_demotion, sandbox_damping]")
    alone = SEED_CONFIG.replace(rerank, "    rerank: [sandbox_damping]")
    page = [document("A", 10.0, "a.example"),
            document("B", 9.0, "b.example", spam_score=0.9),
            document("C", 8.0, "c.example", domain_age_days=30.0),
            document("D", 7.0, "d.example"), document("E", 6.0, "e.example")]
    shadowed, only = EngineMetrics(), EngineMetrics()
    served = serve(both + EXPERIMENT, page, shadowed, "control")
    plain = serve(alone, page, only)
    assert position_changes(shadowed, "spam_demotion", "shadow")  # B would have dropped
    # C: 8.0 -> 5.0 goes below D and E, who move up one each
    assert position_changes(shadowed, "sandbox_damping", "applied") == position_changes(
        only, "sandbox_damping", "applied") == {"up": (2, 2.0), "down": (1, 2.0)}
    assert churn(shadowed, "sandbox_damping", "applied") == churn(
        only, "sandbox_damping", "applied") == (1, 0.0)
    assert [d["id"] for d in served["documents"]] == [d["id"] for d in plain["documents"]]


def test_action_counts_are_the_audit_records_by_rule_phase_action_and_mode():
    # Every kind of run: applied, shadow and variant, sort moves, a relaxed rerun, both
    # fallbacks (the fallback rule's and the runner's own).
    bare = "profiles:\n  default:\n    pre-filter: [safe_search]\n"
    adult = [document("x", 2.0, "x.example", adult_score=0.6),
             document("y", 1.0, "y.example", adult_score=0.7)]
    runs = [
        (SEED_CONFIG, seed_page(), None, {}),
        *((SEED_CONFIG + EXPERIMENT, seed_page(), variant, {})
          for variant in ("control", "treatment", "mild")),
        (SEED_CONFIG, adult, None, {"age_mode": "strict"}),  # relaxed and rerun
        (SEED_CONFIG, [document("x", 1.0, "x.example", adult_score=0.95)], None,
         {"age_mode": "strict"}),
        (bare, [document("x", 1.0, "x.example", adult_score=0.95)], None, {}),
    ]
    kinds = set()
    for config, page, variant, query in runs:
        metrics = EngineMetrics()
        out = serve(config, page, metrics, variant, **query)
        audit = Counter((r["rule"], r["phase"], r["action"], r["mode"], "default")
                        for r in out["audit"])
        counted = dict(metrics.snapshot()["counters"]["rearrange_rule_actions"])
        assert counted == audit
        kinds |= set(audit)
    assert ("spam_demotion", "rerank", "rescore", "shadow", "default") in kinds
    assert ("sort", "rerank", "move", "applied", "default") in kinds
    assert ("empty_result_fallback", "post-filter", "fallback", "applied", "default") in kinds
    assert ("pipeline", "post-filter", "fallback", "applied", "default") in kinds
