"""One Settings object, read from the environment."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.banlist.redis.client import REPLY_MARGIN, check_url
from app.errors import SettingsError


class Settings(BaseSettings):
    """Service settings; every field is an environment variable (docs/operations.md#settings)."""

    model_config = SettingsConfigDict(env_prefix="REARRANGE_", extra="ignore")

    config: Path = Path("config/rules.yaml")
    redis_url: str | None = Field(
        default=None, validation_alias=AliasChoices("REDIS_URL", "REARRANGE_REDIS_URL")
    )
    # How long a reply from Redis is waited for, and a new connection: a Redis cut off by
    # the network answers nothing and refuses nothing, so only these notice it
    # (app/banlist/redis/client.py); a blocking command's wait stays under the first
    redis_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    redis_connect_timeout_seconds: float = Field(default=2.0, gt=0, le=60)
    # Acknowledgements a Redis write waits for (app/banlist/redis/durable.py): "auto" (one
    # while the primary has replicas), or a number (0: never wait); and for how long
    redis_wait_replicas: int | None = None
    redis_wait_ms: int = Field(default=1000, ge=1, le=4000)
    admin_tokens: str = ""
    banlist_read_auth: bool = False  # true: banlist reads (lookup, list, export…) need a token
    # Four eyes (app/banlist/review.py): a ban that would have removed results from more than
    # this share of the last hour's requests waits for a second person's approval; 1: never
    ban_review_share: float = Field(default=0.001, ge=0, le=1)
    # Signed-in analysts: admin routes also take JWTs (OIDC access tokens) signed by a key of
    # this JWKS, a file or an http(s) URL (app/api/jwks.py); unset, only the static tokens.
    # Set, the issuer and audience every token must carry are required too.
    admin_jwks: str | None = None
    admin_jwt_issuer: str | None = Field(default=None, validate_default=True)
    admin_jwt_audience: str | None = Field(default=None, validate_default=True)
    admin_jwt_leeway_seconds: float = Field(default=30.0, ge=0, le=300)  # clock skew allowed
    # A URL's keys: used this long, then fetched again (kept while the fetch fails); fetched at
    # most once per cooldown, whatever comes (unknown `kid`s, failures); each fetch's time
    admin_jwks_refresh_seconds: float = Field(default=300.0, gt=0)
    admin_jwks_cooldown_seconds: float = Field(default=30.0, gt=0)
    admin_jwks_timeout_seconds: float = Field(default=5.0, gt=0, le=60)
    audit_log: str | None = None
    # Request capture for `rearrange replay` (docs/replay.md): off unless a path is given;
    # `{pid}` in it is replaced by the process id (one file per worker)
    capture_path: Path | None = None
    capture_rate: float = Field(default=0.01, ge=0, le=1)  # the share of requests captured
    capture_max_body_bytes: int = Field(default=1 << 20, ge=1)  # a larger body is not kept
    capture_max_file_bytes: int = Field(default=64 << 20, ge=1024)  # then the file rotates
    capture_keep: int = Field(default=4, ge=0)  # rotated files kept: PATH.1 .. PATH.<keep>
    capture_queue: int = Field(default=1000, ge=1)  # bodies waiting for the writer
    # Interleaved pages wait this long for their feedback (POST /v1/feedback), and at most
    # this many bytes of them per process (the oldest go first); with Redis, as long there
    feedback_window_seconds: float = Field(default=3600.0, gt=0, le=7 * 86400)
    feedback_max_bytes: int = Field(default=256 << 20, ge=1 << 16)
    banlist_path: Path = Path("var/banlist.jsonl")
    banlist_seed: Path | None = None
    # Embedded store only: replay the log, take no writes (409), hold no lock on it, so
    # several processes (uvicorn workers) can serve the same frozen list
    banlist_read_only: bool = False
    banlist_snapshot_path: Path | None = Path("var/banlist.snapshot.json")
    # With Redis: a starting replica's first copy, when it has no local snapshot: another
    # replica's GET /v1/banlist/snapshot, or the same bytes from anywhere (bootstrap.py)
    banlist_bootstrap_url: str | None = None
    banlist_redis_prefix: str = "rearrange:"
    banlist_retention_seconds: float = Field(default=86400.0, gt=0)
    # How long the history (and lookup's former entries) lasts in Redis: a stream of its own
    banlist_history_days: float = Field(default=365.0, gt=0)
    banlist_block_seconds: float = Field(default=1.0, gt=0, le=2.0)
    banlist_snapshot_seconds: float = Field(default=300.0, gt=0)  # serializing 1 M: ~1 s CPU
    max_documents: int = Field(default=1000, ge=1)
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_text_chars: int = Field(default=200_000, ge=1)
    config_poll_seconds: float = Field(default=1.0, ge=0)
    sanctions_quarantine_enter: float = 0.7
    sanctions_quarantine_exit: float = 0.5
    sanctions_ban_enter: float = 0.9
    sanctions_ban_exit: float = 0.6
    # How long an appeal keeps a host clean when it says neither a duration nor permanent:
    # immunity that ends, so a cleared host that turns to spam again is scored again
    sanctions_appeal_pin_days: float = Field(default=90.0, gt=0, le=3650)
    deadline_ms: float = Field(default=100.0, ge=0)  # optional rules skipped past it; 0: never
    # Python rules (docs/config.md#python-rules): processes running them (calls at once); a
    # call's time when neither the deadline nor its step's timeout_ms gives one
    python_rule_workers: int = Field(default=4, ge=1, le=64)
    python_rule_timeout_ms: float = Field(default=1000.0, gt=0)
    body_timeout_seconds: float = Field(default=5.0, gt=0)  # a request body must arrive by then
    header_timeout_seconds: float = Field(default=5.0, gt=0)  # `serve`: headers, or closed
    drain_seconds: float = Field(default=5.0, ge=0)  # SIGTERM: /readyz 503 this long, then stop
    access_log: bool = False  # uvicorn's line per request: off, the balancer logs requests
    # Ours and uvicorn's; lower case, as uvicorn takes it
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    # Several workers: where each writes its metrics for every scrape to sum (prometheus_client's
    # variable, read by it at import; `rearrange serve --workers N` sets it to a fresh one)
    metrics_dir: Path | None = Field(
        default=None, validation_alias=AliasChoices("PROMETHEUS_MULTIPROC_DIR"))
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)  # `serve`: the control port (every route)
    # `serve`: the data port, POST /v1/rerank and GET /healthz on the engine's own listener
    data_port: int = Field(default=8081, ge=0, le=65535)

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value:
            check_url(value)  # its ValueError names what is wrong; the start names REDIS_URL
        return value or None

    @field_validator("redis_wait_ms", "banlist_block_seconds")
    @classmethod
    def _under_timeout(cls, value: float, info: ValidationInfo) -> float:
        """WAIT and XREAD BLOCK hold the reply back that long on purpose: a socket timeout
        that ran out first would take every such wait for a Redis gone."""
        timeout = info.data.get("redis_timeout_seconds")  # absent: refused itself
        seconds = value / 1000 if info.field_name == "redis_wait_ms" else value
        if timeout is not None and seconds + REPLY_MARGIN > timeout:
            raise ValueError(f"waits {seconds:g} s for Redis's reply on purpose: it must stay "
                             f"{REPLY_MARGIN:g} s under REARRANGE_REDIS_TIMEOUT_SECONDS "
                             f"({timeout:g}); lower this or raise that")
        return value

    @field_validator("redis_wait_replicas", mode="before")
    @classmethod
    def _auto(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("auto", ""):
            return None
        if isinstance(value, str) and not value.strip().isdigit():
            raise ValueError("is `auto` or a number of replicas (0: writes do not wait)")
        return value

    @field_validator("admin_jwks")
    @classmethod
    def _jwks(cls, value: str | None) -> str | None:
        value = (value or "").strip() or None
        scheme, sep, _ = (value or "").partition("://")
        if value is not None and sep and scheme.lower() not in ("http", "https"):
            raise ValueError("is a file path or an http(s) URL of a JWKS (JSON Web Key Set)")
        return value

    @field_validator("admin_jwt_issuer", "admin_jwt_audience")
    @classmethod
    def _jwt_claim(cls, value: str | None, info: ValidationInfo) -> str | None:
        """With a JWKS, a token is taken only from one issuer, for this service: without
        them any token the provider signs (for another application) would do."""
        value = (value or "").strip() or None
        if value is None and info.data.get("admin_jwks"):
            claim = "iss" if info.field_name == "admin_jwt_issuer" else "aud"
            raise ValueError(f"is required with REARRANGE_ADMIN_JWKS: the `{claim}` every "
                             "admin JWT must carry")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("audit_log", "banlist_seed", "banlist_snapshot_path", "capture_path",
                     "metrics_dir", "banlist_bootstrap_url",
                     mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    def tokens(self) -> dict[str, tuple[str, str]]:
        """Token → (actor, role), from `actor:token[:read|:write|:approve]` pairs separated
        by commas.

        A bare `actor:token` is a write token, as before roles existed; an approve token
        may also approve (and reject) others' high-impact bans.
        """
        result: dict[str, tuple[str, str]] = {}
        for pair in filter(None, (p.strip() for p in self.admin_tokens.split(","))):
            actor, sep, rest = pair.partition(":")
            token, _, role = rest.partition(":")
            role = role or "write"
            if not sep or not actor or not token or role not in ("read", "write", "approve"):
                # Name the entry by its actor only: the error must never print a secret.
                raise SettingsError(f"REARRANGE_ADMIN_TOKENS: the entry of actor {actor!r} is not "
                                 "of the form actor:token, actor:token:read, actor:token:write or "
                                 "actor:token:approve")
            if token in result:
                raise SettingsError(f"REARRANGE_ADMIN_TOKENS: a token is listed twice ({actor})")
            result[token] = (actor, role)
        return result
