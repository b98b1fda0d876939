"""/api: the inner_life resource (to be filled)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["inner_life"])
