"""A small typed client of a running service's HTTP API (httpx), what the CLI calls it with.

Two errors, one per kind of failure the CLI reports differently (docs/api.md, exit codes):
`Refused`, the service answered with its error body `{error, field, problem}` (or something
in front of it answered an error); `Unreachable`, no answer at all (connection refused, a
DNS name that does not resolve, a timeout), whose message says so and names the URL.
"""
from __future__ import annotations

from typing import Any

import httpx

CONNECT_SECONDS = 5.0
Json = dict[str, Any]


class Refused(Exception):
    """The service (or a proxy in front of it) answered an error status."""

    def __init__(self, status: int, body: Json) -> None:
        field = body.get("field")
        where = f"{field_said(str(field))}: " if field else ""
        kind = body.get("error")
        own = f" ({kind})" if kind not in (None, "invalid_request", "error") else ""
        super().__init__(f"HTTP {status}: {where}{body.get('problem')}{own}")
        self.status, self.body = status, body


def field_said(field: str) -> str:
    """A refused field as the CLI's user knows it: `expires_at`, `regions[0]`. The service
    names `body.expires_at`, `body.regions.0`, but the body is the CLI's, not theirs."""
    parts = field.split(".")
    if parts[0] == "body" and len(parts) > 1:
        parts = parts[1:]
    return "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in parts).lstrip(".")


class Unreachable(Exception):
    """No answer: `cannot reach http://…: connection refused` (or why else)."""

    def __init__(self, url: str, why: str) -> None:
        super().__init__(f"cannot reach {url}: {why}")
        self.url, self.why = url, why


class Client:
    """The admin and rerank API of one service; every call either answers or raises one of
    the two errors above. `timeout`: seconds to wait for an answer (connecting: 5 s)."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers,
                                  timeout=httpx.Timeout(timeout, connect=CONNECT_SECONDS))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, json: Any = None,
             params: dict[str, Any] | None = None, content: bytes | None = None,
             content_type: str | None = None) -> httpx.Response:
        """One request; the answer if its status is 2xx, else Refused or Unreachable."""
        headers = {"Content-Type": content_type} if content_type else None
        try:
            response = self._http.request(method, path, json=json, params=params,
                                          content=content, headers=headers)
        except httpx.TransportError as exc:
            raise Unreachable(self.base_url, reason(exc)) from None
        if response.is_success:
            return response
        raise Refused(response.status_code, _error_body(response))

    def json(self, method: str, path: str, **kwargs: Any) -> Json:
        """`call`, its JSON body; Refused if a 2xx is not JSON (a proxy's page)."""
        response = self.call(method, path, **kwargs)
        try:
            body: Json = response.json()
        except ValueError:
            raise Refused(response.status_code, {
                "field": None, "problem": f"the answer is not JSON: {response.text[:200]!r}"
            }) from None
        return body

    # --- the routes the CLI uses, by name ---

    def rerank(self, page: Json) -> Json:
        """The answer to `page`, as the RerankResponse schema of the OpenAPI document says
        (the engine's, app/api/contract.py)."""
        return self.json("POST", "/v1/rerank", json=page)

    def add_entry(self, body: Json) -> Json:
        return self.json("POST", "/v1/banlist/entries", json=body)

    def remove_entry(self, entry_id: str, reason: str) -> Json:
        return self.json("DELETE", f"/v1/banlist/entries/{_segment(entry_id)}",
                         json={"reason": reason})

    def edit_entry(self, entry_id: str, body: Json) -> Json:
        return self.json("PATCH", f"/v1/banlist/entries/{_segment(entry_id)}", json=body)

    def lookup(self, url: str, region: str | None = None) -> Json:
        params = {"url": url, **({"region": region} if region else {})}
        return self.json("GET", "/v1/banlist/lookup", params=params)

    def entries(self, after: str | None = None, limit: int = 100, **filters: str) -> Json:
        """A page of the active entries; `filters` as POST /v1/banlist/remove takes them."""
        params = {"limit": limit, **({"after": after} if after else {}), **filters}
        return self.json("GET", "/v1/banlist/entries", params=params)

    def remove_matching(self, filters: dict[str, str], reason: str, dry_run: bool) -> Json:
        return self.json("POST", "/v1/banlist/remove", json={
            "filter": filters, "reason": reason, "dry_run": dry_run})

    def groups(self) -> Json:
        return self.json("GET", "/v1/banlist/groups")

    def changes(self, **filters: Any) -> Json:
        return self.json("GET", "/v1/banlist/changes", params=filters)

    def import_lines(self, body: bytes, mode: str, dry_run: bool = False) -> Json:
        params = {"mode": mode, **({"dry_run": "true"} if dry_run else {})}
        return self.json("POST", "/v1/banlist/import", params=params, content=body,
                         content_type="application/x-ndjson")

    def export(self, fmt: str) -> bytes:
        return self.call("GET", "/v1/banlist/export", params={"format": fmt}).content

    def define_group(self, name: str, domains: list[str], reason: str) -> Json:
        return self.json("PUT", f"/v1/banlist/groups/{_segment(name)}",
                         json={"domains": domains, "reason": reason})

    def reseed(self, structure: str, reason: str, force: bool) -> Json:
        return self.json("POST", f"/v1/admin/{_segment(structure)}/reseed",
                         json={"reason": reason, "force": force})

    def forget_loss(self, structure: str, replica: str, reason: str) -> Json:
        return self.json("DELETE", f"/v1/admin/{_segment(structure)}/lost/{_segment(replica)}",
                         json={"reason": reason})

    def sanction(self, host: str) -> Json:
        return self.json("GET", f"/v1/sanctions/{_segment(host)}")

    def clear_sanction(self, host: str, reason: str, pin_seconds: int | None = None,
                       permanent: bool = False, force: bool = False) -> Json:
        body: Json = {"reason": reason, **({"pin_seconds": pin_seconds} if pin_seconds else {})}
        body.update({k: True for k, on in (("permanent", permanent), ("force", force)) if on})
        return self.json("POST", f"/v1/sanctions/{_segment(host)}/clear", json=body)

    def config(self, version: str | None = None) -> Json:
        tail = f"/versions/{_segment(version)}" if version else ""
        return self.json("GET", f"/v1/admin/config{tail}")

    def config_versions(self) -> list[Json]:
        versions: list[Json] = self.json("GET", "/v1/admin/config/versions")["versions"]
        return versions

    def experiment_results(self, name: str) -> Json:
        return self.json("GET", f"/v1/experiments/{_segment(name)}/results")

    def rollback(self, version: str) -> Json:
        return self.json("POST", "/v1/admin/config/rollback", json={"version": version})


def read_text(url: str, timeout: float = 10.0) -> str:
    """GET one URL (a /metrics page) as text; Refused or Unreachable as a Client's calls."""
    try:
        response = httpx.get(url, timeout=httpx.Timeout(timeout, connect=CONNECT_SECONDS))
    except httpx.TransportError as exc:
        raise Unreachable(url, reason(exc)) from None
    except httpx.InvalidURL as exc:
        raise Unreachable(url, f"not a URL: {exc}") from None
    if not response.is_success:
        raise Refused(response.status_code, _error_body(response))
    return response.text


def reason(exc: httpx.TransportError) -> str:
    """Why there was no answer, in a few words ("connection refused", "no answer within
    60 s")."""
    if isinstance(exc, httpx.TimeoutException):
        kind = "connect" if isinstance(exc, httpx.ConnectTimeout) else "read"
        seconds = exc.request.extensions.get("timeout", {}).get(kind)
        what = "no connection" if kind == "connect" else "no answer"
        return f"{what} within {seconds:g} s" if seconds else f"{what} in time"
    cause: BaseException | None = exc
    while cause is not None:  # httpx wraps httpcore's error, which wraps the socket's
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower()
        cause = cause.__cause__ or cause.__context__
    return str(exc) or type(exc).__name__


def _error_body(response: httpx.Response) -> Json:
    """The service's error body; anything else (a proxy's HTML page) as its text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "problem" in body:
        return body
    text = " ".join(response.text.split())  # one line, whatever a proxy's page holds
    return {"field": None, "problem": text[:500] or response.reason_phrase}


def _segment(text: str) -> str:
    """A path segment: every reserved character percent-encoded (`/` too)."""
    from urllib.parse import quote

    return quote(text, safe="")
