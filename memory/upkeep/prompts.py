"""Prompts of the memory builders (abstracts, episodes, index-time expansion), kept apart from their logic."""

from i18n import N_

ABSTRACT_PROMPT = N_("""You are {name}. Below are your recent thoughts and notes ({count} items).
Write a short thematic abstract of them: the main themes, new and refined ideas, and conclusions.
Give it a title and a few one-word tags.

Items:
{items}

Abstract as JSON:
""")

ABSTRACT_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 80},
        "summary": {"type": "string", "maxLength": 900},
        "tags": {
            "type": "array",
            "minItems": 1,
            "maxItems": 5,
            "items": {"type": "string", "pattern": "^[a-z0-9_-]{2,24}$"},
        },
    },
    "required": ["title", "summary", "tags"],
}

EPISODE_PROMPT = N_("""You are {name}. Summarise {period_text} from your memory below: what happened, with whom,
what was decided, and the overall emotional tone (one word).

Memory:
{items}

Summary as JSON:
""")

EPISODE_SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "maxLength": 900},
        "key_events": {"type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 120}},
        "emotional_tone": {"type": "string", "pattern": "^[a-z]{3,16}$"},
    },
    "required": ["summary", "key_events", "emotional_tone"],
}

EXPANSION_PROMPT = """A memory, said by {author} on {when}:
"{text}"

List what someone might later ask about it: its key phrases (names, places, things, activities), the facts it
states (short sentences, with the names instead of "I" or "my"), and the dates it refers to, resolved against
{when} ("yesterday" said on 8 May 2023 is 7 May 2023). Only what the memory says; nothing invented.

As JSON:
"""

EXPANSION_SCHEMA = {
    "type": "object",
    "properties": {
        "key_phrases": {"type": "array", "maxItems": 8, "items": {"type": "string", "maxLength": 60}},
        "facts": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 160}},
        "dates": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 40}},
    },
    "required": ["key_phrases", "facts", "dates"],
}
