"""The reference behaviour of each built-in rule, by name: app/rules/ declares the rules
(name, phases, Params), these classes add what each does to a page."""
from __future__ import annotations

from typing import Any

from app.config import plugins
from tests.reference.pipeline import Behaviour
from tests.reference.plugins import PythonRule
from tests.reference.rules.demotion import (
    AntiSeoReset,
    QuarantineDemotion,
    SandboxDamping,
    SpamDemotion,
)
from tests.reference.rules.diversity import HostCrowding, NearDuplicates
from tests.reference.rules.filters import (
    Banlist,
    EmptyResultFallback,
    RegionalRemovals,
    SafeSearch,
    SpamBan,
    TopicFilter,
)
from tests.reference.rules.labels import AdLabel, AgeLabel
from tests.reference.rules.query import QueryBoost, QueryHide, QueryPin
from tests.reference.rules.trim import Depth, HostQuota

RULES: dict[str, type[Behaviour]] = {rule.name: rule for rule in (
    Banlist, RegionalRemovals, TopicFilter, SafeSearch, SpamBan, AntiSeoReset, SpamDemotion,
    SandboxDamping, QuarantineDemotion, HostCrowding, NearDuplicates, Depth, HostQuota,
    AdLabel, AgeLabel, EmptyResultFallback, QueryHide, QueryBoost, QueryPin)}


def behaviour(rule: Any) -> Behaviour:
    """The reference behaviour of a configured step's rule (built-in or Python), built with
    its validated parameters and phase."""
    if isinstance(rule, plugins.PythonRule):
        return PythonRule(rule)
    return RULES[rule.name](rule.params, rule.phase)
