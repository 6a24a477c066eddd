"""Python rules that fail, one way each (CONTRACT "Python rules": each is a failure)."""
from __future__ import annotations

ALL = {"pre-filter", "rerank", "diversify", "trim", "annotate", "post-filter"}


class _Rule:
    phases = ALL

    def __init__(self, params: dict) -> None:
        self.params = params


class Raises(_Rule):
    name = "raises"

    def __call__(self, documents, context):
        raise RuntimeError(f"boom in {context['phase']}")


class UnknownId(_Rule):
    name = "unknown_id"

    def __call__(self, documents, context):
        stranger = {"id": "not-in-the-page", "url": "https://x.example/", "score": 1.0}
        return [*documents, stranger], []


class DuplicateId(_Rule):
    name = "duplicate_id"

    def __call__(self, documents, context):
        return [*documents, documents[0]], []


class NanScore(_Rule):
    name = "nan_score"

    def __call__(self, documents, context):
        documents[0]["score"] = float("nan")
        return documents, [{"doc_id": documents[0]["id"], "action": "rescore",
                            "reason": "nan", "delta": None}]


class SilentRemoval(_Rule):
    name = "silent_removal"

    def __call__(self, documents, context):
        return documents[:-1], []


class SilentRescore(_Rule):
    name = "silent_rescore"

    def __call__(self, documents, context):
        documents[0]["score"] += 1
        return documents, []


class NotAPair(_Rule):
    name = "not_a_pair"

    def __call__(self, documents, context):
        return documents


RULES = [Raises, UnknownId, DuplicateId, NanScore, SilentRemoval, SilentRescore, NotAPair]
