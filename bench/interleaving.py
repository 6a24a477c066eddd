"""Benchmark: impressions an interleaved experiment needs to decide, beside what an A/B test
on clicks needs for the same two rankers.

The user population is simulated, the same for both designs:

- a query has CANDIDATES documents, each with a relevance r ~ Beta(0.6, 2.5) (most
  documents are poor, a few good), and an intent i ~ Beta(2, 2) (how likely its user is
  to click at all: some queries are answered by the snippets, some not); a document's
  click probability is i·r;
- control shows the top 10 of r + N(0, 0.30); the change touches 30 % of the queries
  (TOUCHED), on which treatment shows the top 10 of r + N(0, σ) with a smaller σ (a
  better ranker; `--treatment-noise`, 0.05 by default, which makes treatment's share of
  the decisive impressions about 55/45); on the others both pages are control's;
- a user reads the page top down (a cascade): at each position they click with the
  document's probability, leave satisfied after a click with that probability again, and
  otherwise go on to the next position with probability 0.85 (or leave).

Interleaving: each impression is a team-draft merge of the two top 10s (a coin per round
picks which team chooses first; `app/experiments` reads the outcome as the service does:
attribution.py and the always-valid test of sequential.py, alpha 0.05, read after every
impression). Reported: the preference, how many impressions give a decisive outcome, and
the impressions until the test decides (median and 80th percentile over seeds; the 80th
percentile is what a fixed-horizon design with power 0.8 would compare with), and the
share of seeds that decided for the wrong side; and, to compare like with like, what a
sign test on the same outcomes read once at a fixed horizon (alpha 0.05, power 0.8) needs.

A/B: the same users split in two, each arm served one ranker, on the click-through rate
(pages with at least one click). Its two rates are measured on --ab-pages pages per arm,
and the sample size is the textbook fixed-horizon one for two proportions (alpha 0.05
two-sided, power 0.8): n per arm = (z_{α/2}√(2 p̄(1−p̄)) + z_β √(p1(1−p1) + p2(1−p2)))² /
(p1 − p2)². That is the A/B test's best case: read once at its horizon, never peeked at
(an always-valid A/B test needs more).

Run from the repository root: `python -m bench.interleaving [--seeds 101]
[--treatment-noise 0.05] [--priors]`. `--priors` prints, for shares of treatment's wins
from 0.52 to 0.70, the median decisive outcomes each prior of the mixture needs.
"""
from __future__ import annotations

import argparse
import math
import random
import statistics
from collections.abc import Sequence

from app.experiments.attribution import attribute
from app.experiments.impressions import Impression, Team
from app.experiments.sequential import ALPHA, decide, log_e_value

CANDIDATES = 30
DEPTH = 10
CONTROL_NOISE = 0.30
CONTINUE = 0.85
TOUCHED = 0.3  # the share of queries whose page the change alters
INTENT = (2.0, 2.0)  # Beta: a query's propensity to be clicked at all
Z_ALPHA, Z_POWER = 1.959963984540054, 0.8416212335729143  # two-sided 0.05, power 0.8


def query(rng: random.Random, treatment_noise: float) -> tuple[list[float], list[int],
                                                               list[int]]:
    """The click probabilities of a query's candidates and the two rankers' top DEPTH
    (indexes). On the queries the change does not touch both show control's page."""
    intent = rng.betavariate(INTENT[0], INTENT[1])
    rel = [rng.betavariate(0.6, 2.5) for _ in range(CANDIDATES)]
    noise = [rng.gauss(0, 1) for _ in range(CANDIDATES)]

    def top(sigma: float) -> list[int]:
        return sorted(range(CANDIDATES), key=lambda i: -(rel[i] + sigma * noise[i]))[:DEPTH]

    control = top(CONTROL_NOISE)
    treatment = control
    if rng.random() < TOUCHED:  # the better ranker, with errors of its own
        treatment = sorted(range(CANDIDATES),
                           key=lambda i: -(rel[i] + rng.gauss(0, treatment_noise)))[:DEPTH]
    return [intent * r for r in rel], control, treatment


def team_draft(control: Sequence[int], treatment: Sequence[int], rng: random.Random
               ) -> list[tuple[int, Team]]:
    """Team-draft interleaving (Radlinski, Kurup and Joachims, 2008), written out here: each
    round the team with fewer picks (a coin on a tie) adds its best document not yet shown."""
    shown: list[tuple[int, Team]] = []
    seen: set[int] = set()
    picks = {"control": 0, "treatment": 0}
    lists = {"control": list(control), "treatment": list(treatment)}
    while len(shown) < DEPTH:
        if picks["control"] != picks["treatment"]:
            team: Team = "control" if picks["control"] < picks["treatment"] else "treatment"
        else:
            team = "control" if rng.random() < 0.5 else "treatment"
        left = [d for d in lists[team] if d not in seen]
        if not left:
            other: Team = "treatment" if team == "control" else "control"
            if not [d for d in lists[other] if d not in seen]:
                break
            team, left = other, [d for d in lists[other] if d not in seen]
        shown.append((left[0], team))
        seen.add(left[0])
        picks[team] += 1
    return shown


def clicks(rel: Sequence[float], page: Sequence[int], rng: random.Random) -> list[int]:
    """The documents a cascade user clicks on `page`."""
    clicked = []
    for doc in page:
        if rng.random() < rel[doc]:
            clicked.append(doc)
            if rng.random() < rel[doc]:
                break
        if rng.random() >= CONTINUE:
            break
    return clicked


def one_impression(rng: random.Random, treatment_noise: float, n: int) -> str | None:
    """One query served interleaved and clicked by a simulated user: its outcome."""
    rel, control, treatment = query(rng, treatment_noise)
    merged = team_draft(control, treatment, rng)
    impression = Impression(str(n), "bench", "u", 0.0, tuple((str(d), t) for d, t in merged))
    return attribute(impression, [str(d) for d in clicks(rel, [d for d, _ in merged], rng)])


def interleaved(seed: int, treatment_noise: float, cap: int) -> tuple[int, str, int, int]:
    """One experiment read after every impression: (impressions until a decision or cap,
    the decision, treatment's wins, control's wins)."""
    rng = random.Random(seed)
    wins = losses = 0
    for n in range(1, cap + 1):
        outcome = one_impression(rng, treatment_noise, n)
        if outcome == "treatment":
            wins += 1
        elif outcome == "control":
            losses += 1
        else:
            continue
        decision = decide(wins, losses)
        if decision != "continue":
            return n, decision, wins, losses
    return cap, "continue", wins, losses


def outcome_rates(treatment_noise: float, impressions: int, seed: int) -> dict[str, float]:
    """The shares of impressions each outcome (and none) takes."""
    rng = random.Random(seed)
    counts = {"treatment": 0, "control": 0, "tie": 0, "none": 0}
    for n in range(impressions):
        outcome = one_impression(rng, treatment_noise, n)
        counts[outcome or "none"] += 1
    return {k: v / impressions for k, v in counts.items()}


def ctr(treatment_noise: float, pages: int, seed: int) -> tuple[float, float]:
    """The click-through rates (pages with a click) of control's and treatment's pages."""
    rng = random.Random(seed)
    hits = [0, 0]
    for _ in range(pages):
        rel, control, treatment = query(rng, treatment_noise)
        hits[0] += bool(clicks(rel, control, rng))
        hits[1] += bool(clicks(rel, treatment, rng))
    return hits[0] / pages, hits[1] / pages


def ab_sample_size(p1: float, p2: float) -> float:
    """Pages per arm a fixed-horizon two-proportion test needs (alpha 0.05, power 0.8)."""
    mean = (p1 + p2) / 2
    top = Z_ALPHA * math.sqrt(2 * mean * (1 - mean)) + Z_POWER * math.sqrt(
        p1 * (1 - p1) + p2 * (1 - p2))
    return top * top / (p1 - p2) ** 2


def priors(seeds: int) -> None:
    """Median decisive outcomes until a decision, per prior a and true share."""
    print("share  " + "  ".join(f"a={a:<5g}" for a in (1, 10, 50, 200)))
    for share in (0.52, 0.55, 0.6, 0.7):
        row = []
        for a in (1.0, 10.0, 50.0, 200.0):
            needed = []
            for seed in range(seeds):
                rng, w, l, n = random.Random(seed), 0, 0, 0  # noqa: E741
                while log_e_value(w, l, a) < -math.log(ALPHA) and n < 200_000:
                    n += 1
                    if rng.random() < share:
                        w += 1
                    else:
                        l += 1  # noqa: E741
                needed.append(n)
            row.append(statistics.median(needed))
        print(f"{share:<5}  " + "  ".join(f"{m:<7g}" for m in row))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=101)
    parser.add_argument("--treatment-noise", type=float, default=0.05)
    parser.add_argument("--cap", type=int, default=200_000, help="impressions per seed")
    parser.add_argument("--ab-pages", type=int, default=400_000)
    parser.add_argument("--priors", action="store_true")
    args = parser.parse_args()
    if args.priors:
        priors(args.seeds)
        return
    rates = outcome_rates(args.treatment_noise, 100_000, 1)
    decisive = rates["treatment"] + rates["control"]
    print(f"outcomes per impression: treatment {rates['treatment']:.3f}, control "
          f"{rates['control']:.3f}, tie {rates['tie']:.3f}, no click {rates['none']:.3f}; "
          f"preference {rates['treatment'] / decisive:.3f}")
    runs = [interleaved(seed, args.treatment_noise, args.cap) for seed in range(args.seeds)]
    needed = sorted(n for n, _, _, _ in runs)
    wrong = sum(d == "control" for _, d, _, _ in runs)
    undecided = sum(d == "continue" for _, d, _, _ in runs)
    p80 = needed[math.ceil(0.8 * len(needed)) - 1]
    print(f"interleaving, {args.seeds} seeds: impressions to a decision: median "
          f"{statistics.median(needed):.0f}, 80th percentile {p80}; wrong side {wrong}, "
          f"undecided at {args.cap} {undecided}")
    c1, c2 = ctr(args.treatment_noise, args.ab_pages, 2)
    per_arm = ab_sample_size(c1, c2)
    print(f"A/B on click-through: control {c1:.4f}, treatment {c2:.4f} "
          f"({(c2 - c1) / c1:+.2%}); fixed horizon, alpha 0.05, power 0.8: "
          f"{per_arm:,.0f} pages per arm, {2 * per_arm:,.0f} in all")
    share = rates["treatment"] / decisive  # a sign test at the same alpha and power, read once
    fixed = ((Z_ALPHA * 0.5 + Z_POWER * math.sqrt(share * (1 - share))) / (share - 0.5)) ** 2
    print(f"interleaving read once at a fixed horizon (sign test, alpha 0.05, power 0.8): "
          f"{fixed / decisive:,.0f} impressions")
    print(f"A/B (both arms) / interleaving: {2 * per_arm / p80:.1f}x the always-valid test's "
          f"80th percentile, {2 * per_arm * decisive / fixed:.1f}x at a fixed horizon each")


if __name__ == "__main__":
    main()
