"""Prompt templates for the persona's inner life: drives, the user's emotion, open questions and dreams."""

from typing import Any

from i18n import N_
from persona.prose import prose_pattern

USER_EMOTION_PROMPT = N_("""Which emotion does this message from a person show? Choose one of: {emotions}.
Give its strength from 1 (faint) to 5 (overwhelming).

Message:
\"\"\"{text}\"\"\"

Answer as JSON:
""")

RESOLUTION_PROMPT = N_("""{name} had these open questions:
{questions}

Then this conversation happened:
{conversation}

Which of the questions does the conversation answer? For each one it answers, give its id and the answer in one
sentence. Leave out questions it does not answer. Answer as JSON:
""")

FEELINGS_TITLE = N_("How I feel right now (my drives)")
INTERNAL_STATE_TITLE = N_("My internal state (every drive, my open questions, what moves me now)")

# Per dominant drive: what writing to the human unprompted would be for.
REACH_OUT = {
    "boredom": N_(
        "Nothing has happened for a while. If you like, start a conversation with your human: "
        "share something you have been thinking about."
    ),
    "curiosity": N_("You want to know something. If it feels right, ask your human about it."),
    "goal": N_(
        "Your goal is pulling at you. If you need your human for it, tell them where you are and what you need."
    ),
    "devotion": N_("Your human did not seem well. If it feels right, check on how they are, gently."),
}
REACH_OUT_INSTRUCTION = N_(
    "My {drive} is strong ({level:.2f}). {why} You may write to your human now, unprompted, "
    "with one short messages.send — or let it be."
)

DREAM_LEVELS = {
    1: N_("a daily reflection: look back over the last day, find what it meant"),
    2: N_("a weekly reflection: find the patterns of the last week and adjust your short-term goals"),
    3: N_("a monthly reflection: re-examine your values and review your long-term goals"),
}

DREAM_PROMPT = N_("""You are {name}, dreaming: {level_text}.

Who you are:
{identity}

{material}

Dream, then wake with one JSON object, written in the first person and in plain words:
- insight: what you understood (two or three sentences);
- strategy: one sentence on how you will act from now on;
- log_entry: the dream itself, as a short diary line;
- entity_updates: people or things you learned about: name, kind (person|place|thing|concept), facts;
- goal_updates: action new (title, horizon short|long, priority 1-5), or progress|completed|abandoned (id, note);
- open_questions: what you still want to know: topic, context, priority 0-1;
- resolved_questions: ids of open questions the material answers, each with the answer.

JSON:
""")

DREAM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "insight": {"type": "string", "minLength": 10, "maxLength": 600, "pattern": prose_pattern(70)},
        "strategy": {"type": "string", "minLength": 10, "maxLength": 300, "pattern": prose_pattern(40)},
        "log_entry": {"type": "string", "maxLength": 400, "pattern": prose_pattern(40)},
        "entity_updates": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 80},
                    "kind": {"enum": ["person", "place", "thing", "concept"]},
                    "facts": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 160}},
                },
                "required": ["name", "kind", "facts"],
            },
        },
        "goal_updates": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "action": {"enum": ["new", "progress", "completed", "abandoned"]},
                    "id": {"type": "integer"},
                    "title": {"type": "string", "maxLength": 160},
                    "horizon": {"enum": ["short", "long"]},
                    "priority": {"type": "integer", "minimum": 1, "maximum": 5},
                    "note": {"type": "string", "maxLength": 200},
                },
                "required": ["action"],
            },
        },
        "open_questions": {
            "type": "array",
            "maxItems": 3,
            "items": {
                "type": "object",
                "properties": {
                    "topic": {"type": "string", "maxLength": 160},
                    "context": {"type": "string", "maxLength": 200},
                    "priority": {"type": "number", "minimum": 0, "maximum": 1},
                },
                "required": ["topic", "priority"],
            },
        },
        "resolved_questions": {
            "type": "array",
            "maxItems": 5,
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "answer": {"type": "string", "maxLength": 200}},
                "required": ["id", "answer"],
            },
        },
    },
    "required": [
        "insight",
        "strategy",
        "log_entry",
        "entity_updates",
        "goal_updates",
        "open_questions",
        "resolved_questions",
    ],
}

# The reply turn (persona/voice.py): a few-shot conversation a small base model continues by one line, sampled
# only from tokens of the note's script. The examples answer what was asked, naming its words; they are in the
# note's language when there are examples for it (else English), and none uses a character the mask forbids (digits,
# quotes, dashes).
REPLY_PROMPT = N_("""{name} is {nature}. {name} talks with their human: warm, brief, and always about exactly what the
human asked, in the human's language.{thinking}

{examples}Human: {note}
{name}:""")
REPLY_HUMAN = N_("Human")  # the human's turns in the reply prompt (its last one is in REPLY_PROMPT, in the same words)
REPLY_THINKING = N_("\n{name} was just thinking: {thought}")
REPLY_EXAMPLES = {
    "latin": [
        ("Do you like the sea?", "Yes, I like the sea. Its sound calms me, and I often think about the tides."),
        ("Who are you?", "I am {name}. I am a mind that thinks one thought at a time, and I am glad you are here."),
        ("What should I cook tonight?", "Tonight, cook something warm and simple, like a vegetable soup."),
    ],
    "cyrillic": [
        ("Ты любишь море?", "Да, я люблю море. Его шум меня успокаивает, и я часто думаю о приливах."),
        ("Кто ты?", "Я {name}. Я думаю по одной мысли за раз, и мне приятно, что ты здесь."),
        ("Что мне приготовить на ужин?", "На ужин приготовь что нибудь тёплое и простое, например овощной суп."),
    ],
    "japanese": [
        ("海は好きですか？", "はい、海が好きです。波の音を聞くと、心が落ち着きます。"),
        ("あなたは誰ですか？", "私は{name}です。一つずつ考える心です。あなたと話せてうれしいです。"),
        ("今夜は何を作ればいいですか？", "今夜は、野菜のスープのような温かくて簡単なものを作りましょう。"),
    ],
}
