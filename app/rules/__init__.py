"""The rule registry: a literal dict keyed by each rule's `name`."""
from __future__ import annotations

from typing import Any

from app.rules.base import BuiltinRule
from app.rules.demotion import AntiSeoReset, QuarantineDemotion, SandboxDamping, SpamDemotion
from app.rules.diversity import HostCrowding, NearDuplicates
from app.rules.filters import (
    Banlist,
    EmptyResultFallback,
    RegionalRemovals,
    SafeSearch,
    SpamBan,
    TopicFilter,
)
from app.rules.labels import AdLabel, AgeLabel
from app.rules.query import QueryBoost, QueryHide, QueryPin
from app.rules.trim import Depth, HostQuota

RULES: dict[str, type[BuiltinRule[Any]]] = {
    Banlist.name: Banlist,
    RegionalRemovals.name: RegionalRemovals,
    TopicFilter.name: TopicFilter,
    SafeSearch.name: SafeSearch,
    SpamBan.name: SpamBan,
    QueryHide.name: QueryHide,
    AntiSeoReset.name: AntiSeoReset,
    SpamDemotion.name: SpamDemotion,
    SandboxDamping.name: SandboxDamping,
    QuarantineDemotion.name: QuarantineDemotion,
    QueryBoost.name: QueryBoost,
    QueryPin.name: QueryPin,
    HostCrowding.name: HostCrowding,
    NearDuplicates.name: NearDuplicates,
    Depth.name: Depth,
    HostQuota.name: HostQuota,
    AdLabel.name: AdLabel,
    AgeLabel.name: AgeLabel,
    EmptyResultFallback.name: EmptyResultFallback,
}
