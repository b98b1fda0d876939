"""Prompts of the memory builders (abstracts, episodes), kept apart from their logic."""

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
        "tags": {"type": "array", "minItems": 1, "maxItems": 5, "items": {"type": "string", "pattern": "^[a-z0-9_-]{2,24}$"}},
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
