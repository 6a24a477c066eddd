"""A Python rule whose behaviour a test draws: tests/engine/test_python_rules_property.py.

Each step is `{drawn: {step: k}}`; the test puts the plan of step k in PLANS before a
request. A plan is plain data, read against the page the rule is given, so the engine and
the reference model, calling the same instance on the same page, see the same rule:

- {"kind": "raise", "exc": name}: raises that exception;
- {"kind": "shape", "shape": i}: returns the i-th malformed (or odd but valid) result;
- {"kind": "output", ...}: returns a page and records; see `output`.
"""
from __future__ import annotations

import json
from typing import Any

ALL = {"pre-filter", "rerank", "diversify", "trim", "annotate", "post-filter"}
PLANS: dict[int, dict[str, Any]] = {}
ERRORS = {"ValueError": ValueError, "KeyError": KeyError, "ZeroDivisionError": ZeroDivisionError,
          "RuntimeError": RuntimeError}


def shapes(documents: list[dict], records: list[dict]) -> list[Any]:
    """Results of the wrong shape, and two of an odd but accepted one (a list pair)."""
    return [documents, (documents,), None, (documents, records, records),
            (tuple(documents), records), (documents, tuple(records)), (documents, None),
            "documents", [documents, records], (documents, records)]


class Drawn:
    name = "drawn"
    phases = ALL

    def __init__(self, params: dict) -> None:
        self.step = params["step"]

    def __call__(self, documents: list[dict], context: dict) -> Any:
        plan = PLANS[self.step]
        if plan["kind"] == "raise":
            raise ERRORS[plan["exc"]](f"drawn failure of step {self.step} in {context['phase']}")
        if plan["kind"] == "shape":
            return shapes(documents, [])[plan["shape"]]
        return output(plan, documents, context)


def _pick(documents: list[dict], i: Any) -> Any:
    """An input id by position (modulo the page), or the literal itself."""
    if isinstance(i, int) and not isinstance(i, bool):
        return documents[i % len(documents)]["id"] if documents else "nobody"
    return i


def output(plan: dict[str, Any], documents: list[dict], context: dict) -> tuple[list, list]:
    """The page in the plan's order (`same`, `reverse`, {keys, keep} sorting and dropping,
    or positions modulo the page, where repeats make duplicates),
    scores set, items corrupted, then records: the ones the changes need if `auto`, the
    drawn ones (any of them may be bad), and one echoing what the rule was handed."""
    n = len(documents)
    echo = json.dumps([documents, context], sort_keys=True)
    order = plan["order"]
    if order == "same":
        positions = list(range(n))
    elif order == "reverse":
        positions = list(range(n))[::-1]
    elif isinstance(order, dict):  # sorted by drawn keys, the ones `keep` says kept
        keys, keep = order["keys"], order["keep"]
        positions = [i for i in sorted(range(n), key=lambda i: (keys[i % len(keys)], i))
                     if keep[i % len(keep)]]
    else:
        positions = [i % n for i in order] if n else []
    out = [dict(documents[i]) for i in positions]
    for i, score in plan["scores"]:
        if out:
            out[i % len(out)]["score"] = score
    if plan["stranger"]:
        out.append({"id": "stranger", "url": "https://x.example/", "score": 1.0})
    records: list[Any] = []
    if plan["auto"]:
        kept = [d["id"] for d in out]
        before = [d["id"] for d in documents if d["id"] in kept]
        old = {d["id"]: d["score"] for d in documents}
        for d in documents:
            if d["id"] not in kept:
                records.append({"doc_id": d["id"], "action": plan["drop_action"],
                                "reason": "drawn drop", "delta": None})
        for after, d in enumerate(out):
            if d["id"] in old and d["score"] != old[d["id"]]:
                delta = plan["rescore_delta"]
                records.append({"doc_id": d["id"], "action": "rescore", "reason": "drawn score",
                                "delta": delta})
            if d["id"] in before and before.index(d["id"]) != after:
                records.append({"doc_id": d["id"], "action": "move", "reason": "drawn move",
                                "delta": plan["move_delta"]})
    for spec in plan["records"]:
        rec = {"doc_id": _pick(documents, spec["doc"]), "action": spec["action"],
               "reason": spec["reason"], "delta": spec["delta"]}
        for key in spec["drop"]:
            rec.pop(key, None)
        if spec["extra"] is not None:
            rec[spec["extra"]] = 1
        records.append(rec)
    if plan["corrupt"] is not None and out:
        at, how = plan["corrupt"]
        at %= len(out)
        if how == "not_dict":
            out[at] = [out[at]["id"]]
        elif how == "no_id":
            del out[at]["id"]
        elif how == "int_id":
            out[at]["id"] = 7
        elif how == "no_score":
            del out[at]["score"]
        elif how == "record_not_dict":
            records.insert(at % (len(records) + 1), "a record")
    if plan["echo"] and documents:
        records.append({"doc_id": documents[0]["id"], "action": "move", "reason": echo,
                        "delta": 0})
    return out, records


RULES = [Drawn]
