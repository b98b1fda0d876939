"""The lines the persona sends on its own, not written by its model: what it tells its owner is waiting for them, and
the one polite line a stranger gets (managers/conversation.py, managers/channels.py). People read them, so they
are marked for the `web` catalogue (i18n/) and said in the reader's language."""

from __future__ import annotations

import i18n
from i18n import N_

CONTACT_REQUEST = N_(
    "{name} wrote to me on {channel} for the first time. Their message waits for you on the People "
    "page: let them in or refuse them."
)
CONTACT_REQUEST_CLAIM = N_(
    "Someone wrote to me on {channel} claiming to be {name}, but the channel could not verify "
    "it ({why}). It waits for you on the People page."
)
APPROVAL = N_("I would like to run {command}, and it waits for your approval (approval {id}): {reason}")
REFUSED = N_("My message to {name} on {channel} could not be delivered: {error}")
STRANGER = N_("Hello! I've passed your message to my owner, who decides whether we talk. Thank you for your patience.")


def say(message: str, language: str | None, **values: object) -> str:
    """`message` in `language` (its English when there is no translation), filled with `values`."""
    return i18n.text(message, language, domain="web").format(**values)


__all__ = ["APPROVAL", "CONTACT_REQUEST", "CONTACT_REQUEST_CLAIM", "REFUSED", "STRANGER", "say"]
