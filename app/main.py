"""`uvicorn app.main:app`, CONTRACT.md's start line: the app, built from the environment
when uvicorn imports this module (`rearrange serve` builds the same app: app/api/serving.py)."""
from __future__ import annotations

from app.api.app import create_app

app = create_app()
