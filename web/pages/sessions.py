"""The sessions page (to be filled)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
