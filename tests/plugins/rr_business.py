"""Well-behaved Python rules: what a search team would write."""
from __future__ import annotations

import json
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field


class DemoteParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str
    by: float = Field(1.0, gt=0)


class DemoteHost:
    """score -= by for every document on `host`."""

    name = "demote_host"
    phases = {"rerank"}
    Params = DemoteParams

    def __init__(self, params: DemoteParams) -> None:
        self.params = params

    def __call__(self, documents, context):
        records = []
        for doc in documents:
            if urlsplit(doc["url"]).hostname == self.params.host:
                doc["score"] -= self.params.by
                records.append({"doc_id": doc["id"], "action": "rescore", "delta": -self.params.by,
                                "reason": f"host {self.params.host} demoted by {self.params.by:g}"})
        return documents, records


class DropTopic:
    """Removes documents with a topic; takes its parameters as a plain dict (no Params)."""

    name = "drop_topic"
    phases = {"pre-filter", "post-filter"}

    def __init__(self, params: dict) -> None:
        self.topic = params.get("topic", "casino")
        # where it writes what it was called with, a JSON line a call, for the tests (it
        # runs in a rule process of the service's: nothing it keeps in memory is theirs)
        self.seen_path = params.get("seen_path")

    def __call__(self, documents, context):
        if self.seen_path:
            with open(self.seen_path, "a") as f:
                f.write(json.dumps({"documents": documents, "context": context}) + "\n")
        kept = [d for d in documents if self.topic not in d.get("topics", [])]
        records = [{"doc_id": d["id"], "action": "remove", "reason": f"topic {self.topic}",
                    "delta": None} for d in documents if d not in kept]
        return kept, records


class Reverse:
    """Reverses the page, with a move record per document that moved."""

    name = "reverse"
    phases = {"diversify", "annotate"}

    def __init__(self, params: dict) -> None:
        pass

    def __call__(self, documents, context):
        out = documents[::-1]
        records = [{"doc_id": d["id"], "action": "move", "reason": "reversed", "delta": None}
                   for i, d in enumerate(out) if documents[i]["id"] != d["id"]]
        return out, records


RULES = [DemoteHost, DropTopic, Reverse]
