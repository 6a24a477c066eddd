"""One Settings object, read from the environment."""
from __future__ import annotations

from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Service settings; every field is an environment variable (see README)."""

    model_config = SettingsConfigDict(env_prefix="REARRANGE_", extra="ignore")

    config: Path = Path("config/rules.yaml")
    redis_url: str | None = Field(
        default=None, validation_alias=AliasChoices("REDIS_URL", "REARRANGE_REDIS_URL")
    )
    admin_tokens: str = ""
    audit_log: str | None = None
    banlist_path: Path = Path("var/banlist.jsonl")
    banlist_seed: Path | None = None
    max_documents: int = Field(default=1000, ge=1)
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    max_text_chars: int = Field(default=200_000, ge=1)
    config_poll_seconds: float = Field(default=1.0, ge=0)
    deadline_ms: float = Field(default=100.0, ge=0)  # optional rules skipped past it; 0: never
    body_timeout_seconds: float = Field(default=5.0, gt=0)  # a request body must arrive by then
    drain_seconds: float = Field(default=5.0, ge=0)  # SIGTERM: /readyz 503 this long, then stop
    host: str = "127.0.0.1"
    port: int = 8080

    @field_validator("audit_log", "banlist_seed", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    def tokens(self) -> dict[str, str]:
        """Token → actor, from `actor:token` pairs separated by commas."""
        result: dict[str, str] = {}
        for pair in filter(None, (p.strip() for p in self.admin_tokens.split(","))):
            actor, sep, token = pair.partition(":")
            if not sep or not actor or not token:
                raise ValueError(
                    f"REARRANGE_ADMIN_TOKENS: '{pair}' is not of the form actor:token"
                )
            result[token] = actor
        return result
