"""The banlist's write bodies (pydantic): `POST /v1/banlist/entries`, `PATCH` and `DELETE
…/{id}` and `PUT /v1/banlist/groups/{name}` take them, and an import validates each line
with the same model, so a line and a single add are refused alike."""
from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, StrictInt
from pydantic import Field as PField

from app.banlist.base import MAX_REASON, MAX_TTL_SECONDS, MAX_VALUE, EntryEdit, expiry
from app.banlist.model import Scope
from app.errors import BanlistError

Region = Annotated[str, PField(min_length=1, max_length=16)]


class BanIn(BaseModel):
    """POST /v1/banlist/entries."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    scope: Scope
    value: str = PField(min_length=1, max_length=MAX_VALUE)
    reason: str = PField(min_length=1, max_length=MAX_REASON)
    regions: list[Region] = []
    ttl_seconds: StrictInt | None = PField(default=None, gt=0, le=MAX_TTL_SECONDS)
    expires_at: AwareDatetime | None = None
    urgent: bool = PField(default=False, description="ban at once, past a review the ban's "
                          "impact calls for; needs the right to approve, and the ban is "
                          "reviewed after the fact")

    def expiry(self, now: float) -> float | None:
        """Epoch seconds of expiry from ttl_seconds or expires_at (not both)."""
        at = self.expires_at.timestamp() if isinstance(self.expires_at, datetime) else None
        return expiry(self.ttl_seconds, at, now)


class EditIn(BaseModel):
    """PATCH /v1/banlist/entries/{id}: a new expiry (`ttl_seconds` from now, or `expires_at`,
    null for none), new regions (empty: everywhere), or both, and why. What is not given
    stays as it is."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    reason: str = PField(min_length=1, max_length=MAX_REASON)
    regions: list[Region] = PField(default=[], description="not given: as they are")
    ttl_seconds: StrictInt | None = PField(default=None, gt=0, le=MAX_TTL_SECONDS)
    expires_at: AwareDatetime | None = PField(
        default=None, description="null: permanent; not given: as it is")

    def edit(self, now: float) -> EntryEdit:
        """What to change: only the fields given (`expires_at: null` is given)."""
        given = self.model_fields_set
        if self.ttl_seconds is not None and "expires_at" in given:
            raise BanlistError("ttl_seconds", "give ttl_seconds or expires_at, not both")
        at = self.expires_at.timestamp() if isinstance(self.expires_at, datetime) else None
        return EntryEdit(
            self.reason,
            sets_expiry=self.ttl_seconds is not None or "expires_at" in given,
            expires_at=now + self.ttl_seconds if self.ttl_seconds is not None else at,
            regions=tuple(self.regions) if "regions" in given else None)


class UnbanIn(BaseModel):
    """DELETE /v1/banlist/entries/{id}: why the entry is lifted (e.g. an appeal)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = PField(min_length=1, max_length=1000)


class GroupIn(BaseModel):
    """PUT /v1/banlist/groups/{name}: the member domains of an org group, and why."""

    model_config = ConfigDict(extra="forbid")

    domains: list[Annotated[str, PField(min_length=1, max_length=253)]] = PField(
        min_length=1, max_length=10_000)
    reason: str = PField(min_length=1, max_length=1000)
