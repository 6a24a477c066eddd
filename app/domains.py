"""Registrable domains from the Public Suffix List, as the engine has it (src/domain.rs)."""
from __future__ import annotations

from app._engine import is_public_suffix, registrable_domain

__all__ = ["is_public_suffix", "registrable_domain"]
