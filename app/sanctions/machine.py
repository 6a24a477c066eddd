"""The per-host sanction state machine: pure functions of (state, score, thresholds, time)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.banlist.model import iso

CLEAN, QUARANTINE, BANNED = "clean", "quarantine", "banned"


class Thresholds(BaseModel):
    """Enter a sanction above its enter threshold; leave it only below its (lower) exit one.

    Defaults follow seed 002 §16.2: ban above 0.9, unban only below 0.6; the
    quarantine ("yellow card") band sits under the ban with its own hysteresis.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    quarantine_enter: float = Field(0.7, ge=0.0, le=1.0)
    quarantine_exit: float = Field(0.5, ge=0.0, le=1.0)
    ban_enter: float = Field(0.9, ge=0.0, le=1.0)
    ban_exit: float = Field(0.6, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> Thresholds:
        if not self.quarantine_exit < self.quarantine_enter:
            raise ValueError("quarantine_exit must be below quarantine_enter (hysteresis)")
        if not self.ban_exit < self.ban_enter:
            raise ValueError("ban_exit must be below ban_enter (hysteresis)")
        if not self.quarantine_enter <= self.ban_enter:
            raise ValueError("quarantine_enter must not be above ban_enter")
        if not self.quarantine_exit <= self.ban_exit:
            raise ValueError("quarantine_exit must not be above ban_exit")
        return self

    def describe(self) -> str:
        """Quoted in ban reasons, so the audit says which policy decided."""
        return (f"ban > {self.ban_enter:g} until < {self.ban_exit:g}, "
                f"quarantine > {self.quarantine_enter:g} until < {self.quarantine_exit:g}")


def next_state(state: str, score: float, t: Thresholds) -> str:
    """Where a host goes on a new score: up past enter thresholds, down only past exit ones."""
    if score > t.ban_enter:
        return BANNED
    if state == BANNED:
        if score >= t.ban_exit:
            return BANNED
        return QUARANTINE if score >= t.quarantine_exit else CLEAN
    if state == QUARANTINE:
        return QUARANTINE if score >= t.quarantine_exit else CLEAN
    return QUARANTINE if score > t.quarantine_enter else CLEAN


@dataclass(frozen=True, slots=True)
class Transition:
    """One change of a host's state, as kept in its history."""

    at: float
    from_state: str
    to_state: str
    score: float | None
    actor: str
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"at": self.at, "from": self.from_state, "to": self.to_state,
                "score": self.score, "actor": self.actor, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class HostState:
    """What is known of one host (or domain): state, last score, pin, ban entry, history."""

    key: str
    scope: str = "host"  # host or domain: the scope of the ban entry it gets
    state: str = CLEAN
    score: float | None = None
    observed_at: float | None = None
    pinned_until: float | None = None  # appeal: clean until then; inf = permanently
    ban_entry_id: str | None = None
    quarantine_entry_id: str | None = None
    history: tuple[Transition, ...] = field(default=())

    def pinned(self, now: float) -> bool:
        return self.pinned_until is not None and now < self.pinned_until


@dataclass(frozen=True, slots=True)
class Observation:
    """A validated score from the feed."""

    key: str
    scope: str
    score: float
    observed_at: float


def observe(host: HostState, obs: Observation, t: Thresholds, now: float,
            actor: str) -> tuple[HostState, Transition | None]:
    """Apply one observation; (new state, transition or None). Stale ones must be dropped first.

    A pinned host records its score but stays clean until the pin ends.
    """
    target = CLEAN if host.pinned(now) else next_state(host.state, obs.score, t)
    updated = replace(host, score=obs.score, observed_at=obs.observed_at, scope=obs.scope)
    if target == host.state:
        return updated, None
    reason = (f"spam_score {obs.score:g} at {when(obs.observed_at)}: {host.state} -> {target} "
              f"({t.describe()})")
    move = Transition(now, host.state, target, obs.score, actor, reason)
    return replace(updated, state=target, history=host.history + (move,)), move


def is_stale(host: HostState, obs: Observation) -> bool:
    """True for an observation older than the last applied one (out of order)."""
    return host.observed_at is not None and obs.observed_at < host.observed_at


def clear(host: HostState, now: float, until: float, actor: str,
          reason: str) -> tuple[HostState, Transition]:
    """An appeal: back to clean and pinned clean until `until` (inf for permanently)."""
    pin = pin_text(until)
    move = Transition(now, host.state, CLEAN, host.score, actor,
                      f"appeal: {reason} (pinned clean {pin})")
    return replace(host, state=CLEAN, pinned_until=until, history=host.history + (move,)), move


def pin_text(until: float) -> str:
    """`permanently` or `until 2027-03-01T12:00:00.000Z`: how T&S read a pin."""
    return "permanently" if until == float("inf") else f"until {when(until)}"


def when(ts: float) -> str:
    """ISO 8601 for reasons people read; epoch seconds for a time no calendar holds (a feed
    may send observed_at -1e15: its reason must not fail the feed)."""
    try:
        return iso(ts)
    except (ValueError, OverflowError, OSError):
        return f"{ts:.0f} (epoch seconds)"


@dataclass(frozen=True, slots=True)
class Suppressed:
    """An observation a pin kept from sanctioning a host: what it would have done, and why not.

    Recorded so that a pinned host which scores high is seen (in the feed's answer, a counter
    and its alert) instead of silently ignored: the appeal may have been a mistake."""

    key: str
    score: float
    would_be: str  # quarantine or banned
    pinned_until: float  # inf: permanently
    appeal: Transition | None  # the appeal that pinned it, when its history still holds it

    def why(self) -> str:
        """`pinned clean until … by tns's appeal at …: spam_score 0.99 would make it banned`."""
        by = (f" by {self.appeal.actor}'s appeal at {when(self.appeal.at)}"
              if self.appeal is not None else " by an appeal")
        return (f"pinned clean {pin_text(self.pinned_until)}{by}: spam_score {self.score:g} "
                f"would make it {self.would_be}")


def suppression(host: HostState, score: float, t: Thresholds, now: float) -> Suppressed | None:
    """The sanction a pin keeps `host` from on this score; None when it is not pinned or the
    score would not sanction it anyway."""
    if not host.pinned(now) or host.pinned_until is None:
        return None
    would = next_state(host.state, score, t)
    if would == CLEAN:
        return None
    appeal = next((m for m in reversed(host.history)
                   if m.to_state == CLEAN and m.reason.startswith("appeal: ")), None)
    return Suppressed(host.key, score, would, host.pinned_until, appeal)
