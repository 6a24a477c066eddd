"""The banlist index: `BanIndex` of the Rust engine (crates/engine/src/banlist/).

The stores hand it their changes (`add`, `remove`, `set_group`, or a batch with `apply` /
`add_many`); each call is published whole, so a request never sees half a batch. Requests
ask `host_verdict`, `match_url`, `match`; the admin side `explain`, `page`, `get`, …
The Python index it replaced is kept as the reference model in tests/reference/.
"""
from __future__ import annotations

from app._engine import BanIndex
from app.banlist.model import Match

__all__ = ["BanIndex", "Match"]
