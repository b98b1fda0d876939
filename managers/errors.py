"""What a manager raises when a rule refuses a request: the message says what and why, in words any door can show
(a command prefixes its name, the web answers 400, the CLI prints it). A `Refused` is a `ValueError`, so a door
that reports bad input already reports it; an unknown name or id stays a `LookupError` (memory's `NotFound`)."""

from __future__ import annotations

from memory.repositories import NotFound


class Refused(ValueError):
    """A rule of the domain refused the request (a name taken, a limit reached, a row in the wrong state)."""


__all__ = ["NotFound", "Refused"]
