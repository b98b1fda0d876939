"""The language of a tick's fixed prompt texts: the language of the human the persona answers (Epos: the persona
speaks its human's language), so the instructions around the human's words are in the words' language too.

The first human note of the tick decides: its author's `language` (the People page, `run.py users`) when it is
one we have a catalogue for, else the language its letters are written in (`i18n.of_text`: the script, counted —
no model). No human note this tick: the owner's language, else the `language` setting (`auto`: English)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import i18n
from managers import Managers
from memory.note_kinds import HUMAN_SOURCES
from persona.settings import Settings


def tick_language(house: Managers, settings: Settings, notes: Sequence[Any]) -> str:
    for note in notes:
        if note.source not in HUMAN_SOURCES:
            continue
        author_id = getattr(note, "author_id", None)
        language = house.prompt.author_language(author_id) if author_id is not None else None
        code = i18n.supported(language) or i18n.of_text(note.text or "")
        if code:
            return code
    for language in house.prompt.owner_languages():
        if code := i18n.supported(language):
            return code
    return settings.prompt_language
