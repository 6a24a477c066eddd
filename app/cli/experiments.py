"""`rearrange experiments results NAME`: an experiment's results from a running service."""
from __future__ import annotations

import argparse
import sys
from typing import IO, Any

from app.cli.exits import OK, calling
from app.cli.flags import client_of, print_json

DECISIONS = {"treatment": "treatment is better", "control": "control is better",
             "continue": "keep running"}


def results(args: argparse.Namespace, out: IO[str] | None = None,
            err: IO[str] | None = None) -> int:
    """Print GET /v1/experiments/NAME/results; 0 ok, 1 refused (unknown), 3 unreachable."""
    out, err = out or sys.stdout, err or sys.stderr

    def show() -> int:
        with client_of(args) as client:
            doc = client.experiment_results(args.name)
        if args.json:
            print_json(doc, out)
        else:
            print("\n".join(lines(doc)), file=out)
        return OK

    return calling(show, err)


def lines(doc: dict[str, Any]) -> list[str]:
    """The results in words: one line of counts, one of the test (or one per variant)."""
    name = doc["experiment"]
    if doc["method"] != "team_draft":
        return [f"{name} (A/B, this replica since its start):"] + [
            f"  {variant}: {v['exposures']:.0f} exposures, {v['triggered']:.0f} triggered"
            for variant, v in doc["variants"].items()]
    wins = doc["wins"]
    decided = wins["treatment"] + wins["control"]
    head = (f"{name} (team-draft interleaving, {doc['scope']}): {doc['impressions']} "
            f"impressions; wins: treatment {wins['treatment']}, control {wins['control']}; "
            f"ties {doc['ties']}")
    if not decided:
        return [head, f"  no decisive outcome yet: {DECISIONS[doc['decision']]}"]
    lo, hi = doc["confidence_sequence"]
    return [head, f"  treatment preferred in {doc['preference']:.1%} of decisive impressions "
                  f"({lo:.1%} to {hi:.1%}, {1 - doc['alpha']:.0%} always-valid); "
                  f"e-value {doc['e_value']:.3g} (decides at {1 / doc['alpha']:g}): "
                  f"{DECISIONS[doc['decision']]}"]
