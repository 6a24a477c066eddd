"""A replica's first copy from a snapshot instead of from Redis (REARRANGE_BANLIST_BOOTSTRAP_URL).

Reading every entry from Redis costs a start O(entries) of Redis's time, for every worker
of every pod of a rollout. A snapshot (another replica's `GET /v1/banlist/snapshot`, or
the same bytes behind nginx or an object store) costs Redis nothing: the replica loads
it, checks its digest, and follows the changelog from the record the snapshot ends with,
so Redis serves only the changes since. A snapshot that does not continue Redis's history
(older than the changelog's retention, another epoch, ahead of Redis) is only a head
start: the replica then loads Redis's copy instead (replica.py), it never refuses Redis
over a copy it did not make.
"""
from __future__ import annotations

import logging
import time

import httpx

from app.banlist import digest, snapshot
from app.banlist.events import StoreEvents

log = logging.getLogger(__name__)
TIMEOUT = httpx.Timeout(10.0, read=120.0)  # a 10 M-entry snapshot is about half a GiB


def fetch(url: str, name: str, events: StoreEvents) -> snapshot.Snapshot | None:
    """The snapshot at `url`, checked; None (logged once with its cause, counted) when it
    cannot be had or is not what it says: the replica then loads Redis's copy."""
    started = time.monotonic()
    try:
        got = httpx.get(url, timeout=TIMEOUT, follow_redirects=True)
        got.raise_for_status()
        snap = snapshot.decode(got.content)
        tag = got.headers.get("etag", "").strip('"').removeprefix("W/").strip('"')
        if tag and tag != digest.hex_of(snap.digest):
            raise snapshot.SnapshotError(f"its ETag {tag} is not its content's digest "
                                         f"{digest.hex_of(snap.digest)}")
    except (httpx.HTTPError, snapshot.SnapshotError) as exc:
        log.error("%s: no bootstrap from %s (%s); loading Redis's copy instead", name, url,
                  exc)
        events.bootstrapped(name, "failed", time.monotonic() - started)
        return None
    took = time.monotonic() - started
    events.bootstrapped(name, "loaded", took)
    log.info("%s: bootstrapped from %s: version %d epoch %d, %d entries, in %.1f s", name,
             url, snap.seq, snap.epoch, len(snap.index), took)
    return snap
