"""Untrusted input, fenced: human notes, knowledge-base chunks, recalled memories and command results reach the
prompt inside `<data id="…">` … `</data id="…">` blocks that the prompt says are data, never instructions.

The id is new every tick, and any fence marker inside the text is defused, so a note cannot close its block
early and write outside it. Nothing inside a block can raise a command's privileges anyway: those come from
the command's spec (nodes/commands/spec.py).
"""

from __future__ import annotations

import re
import secrets

_MARKER = re.compile(r"<(/?)(\s*data\b)", re.IGNORECASE)
_TOOL_TAG = re.compile(r"<(/?)(\s*tool_call\b)", re.IGNORECASE)


def new_fence() -> str:
    return secrets.token_hex(3)


def defuse(text: str) -> str:
    """The text with every fence or tool-call tag made inert (‹data …›): it reads the same, it opens nothing."""
    return _TOOL_TAG.sub(r"‹\1\2", _MARKER.sub(r"‹\1\2", text))


def fenced(body: str, fence: str, source: str) -> str:
    return f'<data id="{fence}" from="{defuse(source)}">\n{body}\n</data id="{fence}">'
