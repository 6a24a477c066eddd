"""Rule classes that break the contract, one way each; a test picks one by setting RULES."""
from __future__ import annotations

from pydantic import BaseModel


class Nameless:
    phases = {"rerank"}

    def __init__(self, params):
        pass

    def __call__(self, documents, context):
        return documents, []


class Phaseless(Nameless):
    name = "phaseless"
    phases = None


class BadPhase(Nameless):
    name = "bad_phase"
    phases = {"rerank", "sorting"}


class Builtin(Nameless):
    name = "depth"
    phases = {"trim"}


class NotCallable:
    name = "not_callable"
    phases = {"rerank"}

    def __init__(self, params):
        pass


class Params(BaseModel):
    k: int = 3


class Strict(Nameless):
    """Params without extra='forbid': the loader still refuses unknown keys."""

    name = "strict"
    Params = Params


class Refuses(Nameless):
    name = "refuses"

    def __init__(self, params):
        raise ValueError("needs a `table` parameter")


RULES = [Nameless]
