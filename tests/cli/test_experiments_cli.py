"""`rearrange experiments results NAME` against a running service."""
from __future__ import annotations

import json
import time

from app.cli.experiments import lines
from app.cli.main import main
from app.experiments.impressions import Impression
from tests.threaded import serving


def test_results_in_words_and_as_json(settings, capsys):
    with serving(settings) as base:
        assert main(["experiments", "results", "antispam_v7", "--url", base]) == 0
        said = capsys.readouterr().out
        assert said.startswith("antispam_v7 (A/B") and "  control: 0 exposures" in said
        assert main(["--json", "experiments", "results", "antispam_v7", "--url", base]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["method"] == "ab" and set(doc["variants"]) == {"control", "treatment"}
        assert main(["experiments", "results", "nope", "--url", base]) == 1
        assert "refused" in capsys.readouterr().err


def test_an_interleaved_experiment_in_words(client):
    store = client.app.state.services.impressions
    now = time.time()
    store.record([Impression(f"r{i}", "spam_v8", f"u{i}", now,
                             (("a", "treatment"), ("b", "control"))) for i in range(60)])
    for i in range(60):
        store.feedback(f"r{i}", ["a"] if i < 50 else ["b"])
    said = lines(client.get("/v1/experiments/spam_v8/results").json())
    assert said[0] == ("spam_v8 (team-draft interleaving, replica): 60 impressions; wins: "
                       "treatment 50, control 10; ties 0")
    assert said[1].startswith("  treatment preferred in 83.3% of decisive impressions")
    assert said[1].endswith("treatment is better")
    empty = lines({"experiment": "x", "method": "team_draft", "impressions": 3, "scope": "fleet",
                   "wins": {"control": 0, "treatment": 0}, "ties": 1, "decision": "continue"})
    assert empty[1] == "  no decisive outcome yet: keep running"
