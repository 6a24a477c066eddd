"""The banlist admin API: add, edit, remove, look up, list, history, bulk import/export, org
groups.

Routes that write or read Redis, or walk the whole list (listing, export), are plain `def`
(run in the thread pool), so neither a Redis round trip nor an O(entries) pass blocks the
event loop that serves /v1/rerank.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from app._engine import BanIndex
from app.api import errors
from app.api.auth import APPROVE
from app.api.banlist_bulk import SelectionQuery
from app.api.deps import Actor, Reader, Store, Wired, Writer, known_query
from app.api.openapi import WRITES, refusals
from app.api.strict import StrictRoute
from app.banlist import bulk, canon, digest, graveyard, history, snapshot
from app.banlist.base import EntrySpec, GroupSpec, new_groups, still_banning
from app.banlist.bodies import BanIn, EditIn, GroupIn, UnbanIn
from app.errors import Conflict, FieldError, Forbidden, Unavailable

router = APIRouter(prefix="/v1/banlist", tags=["banlist"], route_class=StrictRoute)
# A region as /v1/rerank's query.region takes it: an ISO 3166-1 alpha-2 code, in any case.
REGION = r"^[A-Za-z]{2}$"
IMPORT_MAX_LINES = 10_000


@router.post("/entries", status_code=201, responses={
    200: {"description": "an identical active entry exists: nothing was created, "
                         "`existing` is true"},
    202: {"description": "the ban would have removed results from more than "
                         "REARRANGE_BAN_REVIEW_SHARE of recent requests: it waits for a "
                         "second person (`status`: pending_review, `pending` the review "
                         "list's entry, `share` the measured share); nothing is banned yet"},
    **refusals({**WRITES, 403: "`urgent` without the right to approve",
                422: "an unknown scope, a malformed value, an unknown org group, a bad "
                     "region or expiry: `field` names it"})})
def add_entry(body: BanIn, services: Wired, holder: Writer) -> Any:
    """Ban a URL, prefix, host, domain or org group; returns the entry and the new version,
    and `impact`: the share of the last hour's requests whose page held what it bans.

    An add identical (scope, normalized value, regions) to an active entry creates nothing:
    200 with that entry and `"existing": true`. A ban whose share is over
    REARRANGE_BAN_REVIEW_SHARE is not made: 202, pending a second person's approval
    (`/v1/banlist/pending`). `"urgent": true` (the right to approve needed) bans at once
    and puts the ban in the review list as well, for review after the fact."""
    if body.urgent and APPROVE not in holder.rights:
        raise Forbidden("urgent", "an urgent ban needs the right to approve "
                        "(rearrange:approve, or a static approve token)")
    spec = EntrySpec(body.scope, body.value, body.reason, tuple(body.regions),
                     body.expiry(time.time()))
    review = services.review
    got = review.propose(spec, holder.actor, body.urgent)
    version = services.store.version
    pending = ({"status": "pending_review", "pending": got.pending.as_dict(),
                "share": got.impact.share, "review_share": review.review_share}
               if got.pending is not None else None)
    if got.entry is None:
        assert pending is not None  # propose made the one or the other
        return JSONResponse({**pending, "existing": got.existing,
                             "impact": got.impact.as_dict(), "banlist_version": version},
                            status_code=202)
    answer: dict[str, Any] = {"entry": got.entry.as_dict(), "impact": got.impact.as_dict(),
                              "banlist_version": version}
    if pending is not None:
        answer["review"] = pending
    if got.existing:
        return JSONResponse({**answer, "existing": True})
    return answer


@router.patch("/entries/{entry_id}", responses=refusals({
    **WRITES, 404: "no active entry with this id",
    409: "the new regions would make it the same ban as another active entry (`field`: "
         "regions, `identical_to` its id), or " + WRITES[409],
    422: "a blank reason, both ttl_seconds and expires_at, an expiry in the past or a bad "
         "region: `field` names it"}))
def edit_entry(entry_id: str, body: EditIn, store: Store, actor: Actor) -> dict[str, Any]:
    """Extend, shorten or lift the expiry of an active entry (`expires_at: null` makes it
    permanent), or change its regions: in place, the id kept; the change log records who
    changed what (`before`, `after`) and why. Returns the entry, whether it `changed` (an
    edit that changes nothing records nothing) and the version."""
    entry, changed = store.edit(entry_id, body.edit(time.time()), actor)
    return {"entry": entry.as_dict(), "changed": changed, "banlist_version": store.version}


@router.delete("/entries/{entry_id}", responses=refusals({
    **WRITES, 404: "no active entry with this id"}))
def remove_entry(entry_id: str, body: UnbanIn, store: Store, actor: Actor) -> dict[str, Any]:
    """Lift an entry (an appeal); the removal is logged with actor and reason.

    `still_banned_by` lists the other active entries for the same scope and value (a store
    can hold duplicates written before adds were idempotent): while it is not empty the
    target stays banned."""
    entry = store.remove(entry_id, actor, body.reason)
    others = still_banning(store.index, entry, time.time())
    return {"removed": entry.as_dict(), "still_banned_by": [e.as_dict() for e in others],
            "banlist_version": store.version}


@router.get("/lookup", dependencies=[Depends(known_query)])
def lookup(services: Wired, _: Reader, url: Annotated[str, Query(min_length=1)],
           region: Annotated[str | None, Query(pattern=REGION)] = None) -> dict[str, Any]:
    """Which entries match a URL, through which expression, and whether each applies;
    `pending`, the bans waiting for review that would match it; and `former`, the entries
    that matched it once and are gone (removed, or expired and swept), as the change log
    tells, each with `was`: "was banned until …, by …, reason …". `quarantined` and
    `quarantine`: the same for the sanctions' quarantine list (a demotion, not a removal),
    its own entries or a parent domain's (`matched_by` says which).

    Plain `def`: with Redis, the stream's latest records are read first (off the loop)."""
    lookups = services.metrics.banlist_lookups
    try:
        canonical = canon.canonicalize(url)
    except canon.InvalidURL as exc:
        lookups.labels("invalid").inc()
        raise FieldError("url", f"not a valid URL: {exc}") from None
    store = services.store
    host, path, query = canon.split(canonical)
    now = time.time()
    region = region.upper() if region else None
    matches = _explained(store.index, canonical, host, region, now)
    quarantine = _explained(services.quarantine.index, canonical, host, region, now)
    banned = any(m["applies"] for m in matches)
    lookups.labels("banned" if banned else "matched_inactive" if matches else "clean").inc()
    answer = {"url": url, "canonical": canonical, "host": host, "path": path, "query": query,
              "region": region, "banned": banned, "matches": matches,
              "quarantined": any(m["applies"] for m in quarantine), "quarantine": quarantine,
              "checked": {"url": [canonical.partition("://")[2]],
                          "host": [host], "domain": list(store.index.domain_keys(host)),
                          "prefix": [host + p for p in canon.path_prefixes(path)]},
              "banlist_version": store.version}
    answer["pending"] = services.review.matching(canonical, host)
    try:
        answer.update(former=store.former(canonical, host), history_since=store.history_since())
    except Unavailable as exc:  # Redis unreachable: the live answer stands, history waits
        answer.update(former=None, former_problem=exc.problem)
    return answer


def _explained(index: BanIndex, canonical: str, host: str, region: str | None,
               now: float) -> list[dict[str, Any]]:
    """Every entry of `index` covering the URL, whether it applies here and now, why not."""
    matches = []
    for m in index.explain(canonical, host):
        item = m.as_dict()
        item["applies"] = m.entry.active(region, now)
        if not item["applies"]:
            expired = m.entry.expires_at is not None and m.entry.expires_at <= now
            item["why_not"] = ("expired" if expired else
                               f"only in {', '.join(sorted(m.entry.regions))}")
            if expired:
                item["was"] = graveyard.was(m.entry)
        matches.append(item)
    return matches


@router.get("/entries", dependencies=[Depends(known_query)])
def list_entries(store: Store, _: Reader, taken: SelectionQuery, after: str | None = None,
                       limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
    """Active entries in id order, paged: pass `next` back as `after`.

    Filters, as `POST /v1/banlist/remove` takes them (all that are given must hold):
    `actor`, `reason_contains`, `scope`, `value_suffix`, `created_before`, `created_after`,
    `expires_before`. `total` counts the active entries, or with a filter those it takes.

    Unfiltered, a page costs O(limit), not O(entries): the index finds the next ids without
    making or sorting every entry; filtered, one pass over the index's rows (in Rust).
    """
    index, now = store.index, time.time()
    if after is not None and not after.isdigit() and index.get(after) is None:
        raise FieldError("after", "must be an entry id from a previous page")
    if taken.empty():
        page, more = index.page(after, limit, now)
        total = index.active_count(now)
    else:
        page, more, total = taken.page(index, after, limit, now)
    return {"entries": [e.as_dict() for e in page],
            "next": page[-1].id if more and page else None,
            "total": total, "banlist_version": store.version}


@router.get("/changes", dependencies=[Depends(known_query)],
            responses=refusals({503: "Redis is unreachable (the log lives there)"}))
def changes(store: Store, _: Reader, since: Annotated[int, Query(ge=0)] = 0,
            limit: Annotated[int, Query(ge=1, le=1000)] = 100,
            value: Annotated[str | None, Query(max_length=8192)] = None,
            host: Annotated[str | None, Query(max_length=8192)] = None,
            actor: Annotated[str | None, Query(max_length=256)] = None,
            start: Annotated[str | None, Query(alias="from", max_length=64)] = None,
            until: Annotated[str | None, Query(max_length=64)] = None,
            before: Annotated[int | None, Query(ge=1)] = None,
            order: Literal["asc", "desc"] = "asc") -> dict[str, Any]:
    """The change log: who changed what, when and why; `since` < seq < `before`.

    `order=asc` (the default) gives the oldest changes after sequence `since`: page on with
    `since` = the last seq. `order=desc` gives the newest first: page back with `before` =
    the last seq. `more` says whether changes lie beyond the page in its direction.

    Filters (all that are given must hold): `value` (an entry's or group's value, in any
    scope it is valid in), `host` (changes of entries banning that host, a subdomain of
    it or a parent domain of it, and of org groups holding such a domain), `actor`, and
    `from` / `until` (ISO 8601 times with an offset, or dates; `until` exclusive). A
    removal or expiry is kept when its entry is."""
    flt = history.ChangeFilter.of(value, host, actor, start, until, time.time())
    found, more = history.page(store, flt, since, before, limit, newest=order == "desc")
    return {"changes": found, "more": more, "banlist_version": store.version}


@router.get("/writes/{write_id}", responses=refusals({
    404: "no such write id (the embedded store hands out none)",
    422: "not a write id (32 hex digits)",
    503: "Redis is unreachable: the write's fate cannot be settled now"}))
def write_state(write_id: str, store: Store, _: Actor) -> dict[str, Any]:
    """Whether a write whose answer was lost (a 503 with `write_id`) committed; asking
    settles it: one that had not committed never will."""
    return store.write_state(write_id)


@router.post("/import", openapi_extra={"requestBody": {"required": False, "content": {
    "application/x-ndjson": {"schema": {"type": "string"}, "description":
                             "one entry or group record a line, as the export writes them"},
    "text/csv": {"schema": {"type": "string"},
                 "description": "a header line, then one entry a row (the export's columns)"}}}},
    responses=refusals({**WRITES, 409: "a group of the file is held with other members (or "
                        + WRITES[409] + ")", 413: f"more than {IMPORT_MAX_LINES} lines, or "
                        "the body is over REARRANGE_MAX_BODY_BYTES",
                        422: "some lines refused with mode=all: `refused` lists them by line, "
                        "nothing was imported"}))
async def import_entries(request: Request, services: Wired, holder: Writer,
                         format: Annotated[str, Query(pattern="^(ndjson|csv)$")] = "ndjson",
                         mode: Annotated[str, Query(pattern="^(all|valid)$")] = "all",
                         dry_run: bool = False) -> Response:
    """Import NDJSON or CSV: org group records and entries (an export imports as is); every
    line validated. `mode=all` (default) imports nothing unless every line is valid;
    `mode=valid` imports the valid ones. Refusals by line. A group held with the same
    members is a no-op; one held with other members is a 409 naming it, nothing imported.
    A new ban over REARRANGE_BAN_REVIEW_SHARE is refused unless the token may approve (an
    add of it would wait for review)."""
    store, actor = services.store, holder.actor
    body = await request.body()
    got = bulk.parse(body, format, time.time(), store.index.groups)
    if APPROVE not in holder.rights:
        over = services.review.over_share(got.specs, (g for _, g in got.groups))
        if over:
            refused_lines = {r["line"] for r in over}
            got.specs = [(n, s) for n, s in got.specs if n not in refused_lines]
            got.refused = sorted([*got.refused, *over], key=lambda r: int(r["line"]))
    if got.lines > IMPORT_MAX_LINES:
        return _refuse(413, f"{got.lines} lines; at most {IMPORT_MAX_LINES} per request "
                       "(`rearrange banlist import` sends chunks)", [])
    if got.refused and mode == "all":
        return _refuse(422, f"{len(got.refused)} of {got.lines} lines refused; nothing "
                       "imported (mode=valid imports the valid lines)", got.refused)
    groups, specs = [g for _, g in got.groups], [s for _, s in got.specs]
    result: dict[str, Any] = {"lines": got.lines, "refused": got.refused, "dry_run": dry_run}
    with _naming_lines(got.groups):
        if dry_run or not (specs or groups):
            new_groups(groups, store.index.groups)  # a conflict is a 409 in a dry run too
            result.update(imported=0, banlist_version=store.version)
            return JSONResponse(result)
        # the commit talks to Redis: off the event loop
        defined, added = await anyio.to_thread.run_sync(store.put_import, groups, specs, actor)
    new = [entry for entry, existing in added if not existing]
    result.update(imported=len(new), existing=len(added) - len(new),
                  groups_defined=len(defined), groups_existing=len(groups) - len(defined),
                  first_id=new[0].id if new else None, last_id=new[-1].id if new else None,
                  banlist_version=store.version)
    return JSONResponse(result)


@contextlib.contextmanager
def _naming_lines(groups: list[tuple[int, GroupSpec]]) -> Iterator[None]:
    """A group conflict's 409 names the line of the body that defines the group too."""
    try:
        yield
    except Conflict as exc:
        if exc.field == "group":
            exc.extra["line"] = next((n for n, g in groups if g.name == exc.extra["group"]),
                                     None)
        raise


def _refuse(status: int, problem: str, refused: list[dict[str, Any]]) -> Response:
    return Response(errors.body(status, "body", problem, refused=refused), status,
                    media_type="application/json")


@router.get("/export", response_class=StreamingResponse, responses={200: {
    "description": "every org group, then every active entry, oldest first; the "
                   "X-Banlist-Version header is the version exported",
    "content": {"application/x-ndjson": {"schema": {"type": "string"}},
                "text/csv": {"schema": {"type": "string"}}}}})
def export(store: Store, _: Reader,
                 format: Annotated[str, Query(pattern="^(ndjson|csv)$")] = "ndjson"
                 ) -> StreamingResponse:
    """Every org group, then every active entry oldest first, as NDJSON or CSV: the layout
    the import reads, so an export imports as is."""
    entries = sorted(store.active(), key=lambda e: int(e.id))
    # read after the entries: a group is never dropped, so every group an entry names is
    # there even when a change lands between the two reads
    groups = store.index.groups
    media = "application/x-ndjson" if format == "ndjson" else "text/csv"
    return StreamingResponse(bulk.export(groups, entries, format), media_type=media,
                             headers={"X-Banlist-Version": str(store.version)})


@router.get("/snapshot", response_class=Response, responses={
    200: {"description": "the whole banlist at one version (app/banlist/snapshot.py; the "
                         "format: docs/banlist.md#snapshots). `ETag` is its content digest "
                         "(banlist_digest), `X-Banlist-Version` its version",
          "content": {snapshot.MEDIA_TYPE: {"schema": {"type": "string",
                                                        "format": "binary"}}}},
    304: {"description": "`If-None-Match` names the digest of the list held now"}})
def get_snapshot(request: Request, store: Store, _: Reader) -> Response:
    """The whole banlist at one version, as a replica started with
    REARRANGE_BANLIST_BOOTSTRAP_URL loads it (instead of reading every entry from Redis)."""
    snap, data = store.dump()
    tag = f'"{digest.hex_of(snap.digest)}"'
    headers = {"ETag": tag, "X-Banlist-Version": str(snap.seq), "Cache-Control": "no-cache"}
    if tag in (t.strip() for t in request.headers.get("if-none-match", "").split(",")):
        return Response(status_code=304, headers=headers)
    return Response(data, media_type=snapshot.MEDIA_TYPE, headers=headers)


@router.put("/groups/{name}", responses=refusals({
    **WRITES, 422: "a member that is not a domain: `field` names it"}))
def define_group(name: str, body: GroupIn, store: Store, actor: Actor) -> dict[str, Any]:
    """Define or redefine an org group (domains banned together by one `org` entry)."""
    change = store.define_group(name, body.domains, actor, body.reason)
    return {"group": change, "banlist_version": store.version}


@router.get("/groups")
async def groups(store: Store, _: Reader) -> dict[str, Any]:
    """Every org group and its member domains."""
    return {"groups": {k: list(v) for k, v in sorted(store.index.groups.items())},
            "banlist_version": store.version}
