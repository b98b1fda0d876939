"""Internal state (Nexus Ark): four drives computed from the database at a given moment, and the one rule that
lets the persona write to its human unprompted.

- boredom    = min(1, 0.15 · ln(1 + idle_hours)), idle since the human last wrote;
- curiosity  = 1 − exp(−S/2), S = Σ priority × 0.5^(age_days / half_life) over the ≤ 10 weightiest open questions;
- goal       = (1 − exp(−priority / 3)) × (1 − ½ · completion) of the top active goal;
- devotion   = min(1, Σ w(emotion) × strength/3 × 0.5^(age_h / half_life)) over the user's logged emotions,
               w = 0.3 for a negative emotion, 0.1 for a positive one (Nexus Ark's +0.3 / +0.1).

The human may set a drive's level (the web's Inner life page): the set level holds at first, then fades back to the
computed one with `adjustment_half_life_hours` — level = computed + (set − computed) · 0.5^(age_h / half_life). The
settings in force are in the config table (`drives/adjustments`), every change in `drives/adjustment_history`.

Drives ≥ `inject_at` (0.4) are shown in the prompt. Reaching out is one rule over the same numbers: the dominant
drive above `reach_out_at` (0.6), outside quiet hours, no human note waiting, and at least `cooldown_minutes`
since the last time it was offered. The persona then decides whether to write (the offer starts the cooldown).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any

from llm.json_output import json_object
from memory import Repos
from persona.quiet_hours import in_quiet_hours
from persona.settings import DriveSettings

DRIVES = ("boredom", "curiosity", "goal", "devotion")
LABELS = {"boredom": "boredom", "curiosity": "curiosity", "goal": "the pull of my goal", "devotion": "devotion"}
NEGATIVE = {"sadness", "anger", "fear", "anxious", "tired", "busy", "stressed"}
POSITIVE = {"joy", "happy", "surprise"}
USER_EMOTIONS = sorted(NEGATIVE | POSITIVE | {"neutral"})
ADJUSTMENT_HISTORY_KEPT = 50
ADJUSTMENT_FADED = 0.01  # a setting whose remaining weight is below this no longer moves its drive
MAX_QUESTIONS = 10
LLM_MIN_WORDS = 8  # shorter messages without an emotion word are taken as neutral (no model call)

# A small lexicon for the user's emotion: a cheap signal first (no model call for most messages).
_LEXICON = {
    "sadness": r"sad|unhappy|depress\w*|lonely|miserable|heartbroken|grie\w+|crying|cried|down today|грустн\w*|печал\w*|тоск\w*",  # noqa: E501
    "anger": r"angry|furious|annoyed|irritated|pissed|mad at|hate|злюсь|злой|бесит|раздраж\w*",
    "fear": r"afraid|scared|terrified|frightened|страшно|боюсь",
    "anxious": r"anxious|worried|worry|nervous|uneasy|panic\w*|тревож\w*|волнуюсь|переживаю",
    "tired": r"tired|exhausted|sleepy|worn out|drained|устал\w*|измотан\w*",
    "busy": r"busy|swamped|no time|overloaded|занят\w*|некогда",
    "stressed": r"stress\w*|overwhelm\w*|pressure|deadline|напряж\w*|стресс\w*",
    "joy": r"glad|delighted|great news|wonderful|love it|excited|yay|радуюсь|рад|рада|отлично|ура",
    "happy": r"happy|cheerful|content|good mood|счастлив\w*",
    "surprise": r"surpris\w*|unexpected|wow|no way|удивл\w*|неожиданно",
}
_LEXICON_RE = {name: re.compile(rf"(?<!\w)(?:{pattern})(?!\w)", re.IGNORECASE) for name, pattern in _LEXICON.items()}
_INTENSIFIERS = re.compile(
    r"(?<!\w)(very|so|really|extremely|terribly|completely|очень|так|совсем)(?!\w)|!", re.IGNORECASE
)
# Cues that a message without an emotion word may still carry a feeling (the speaker about themselves, a mood, an
# exclamation, an emoticon): only then is the model asked. A plain question or greeting is taken as neutral.
_FEELING_CUES = re.compile(
    r"(?<!\w)(i feel|i'm feeling|i am feeling|feeling|felt|i'm not|i am not|i can't|i cannot|my day|today was|"
    r"mood|tough|hard day|rough|awful|terrible|horrible|fine|okay|ok|not good|not great|"
    r"я чувствую|чувствую|мне плохо|мне хорошо|настроени\w*|тяжело|ужасно)(?!\w)"
    r"|!|[:;]-?[()]|\u2639|\u263a|[\U0001F600-\U0001F64F]|[\U0001F90C-\U0001F9FF]",
    re.IGNORECASE,
)


@dataclass
class Drives:
    levels: dict[str, float]
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    at: str = ""

    @property
    def dominant(self) -> str:
        return max(DRIVES, key=lambda name: self.levels.get(name, 0.0))

    @property
    def dominant_level(self) -> float:
        return self.levels.get(self.dominant, 0.0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "levels": self.levels,
            "dominant": self.dominant,
            "level": self.dominant_level,
            "details": self.details,
            "at": self.at,
        }


def _aware(value: datetime, like: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=like.tzinfo)


def compute_drives(repos: Repos, now: datetime, settings: DriveSettings, *, since: datetime | None = None) -> Drives:
    """The four drives at `now`. `since`: when the persona started, the idle reference if the human never wrote."""
    details: dict[str, dict[str, Any]] = {}
    last = repos.notes.latest_human_at() or since
    idle_hours = max(0.0, (now - _aware(last, now)).total_seconds() / 3600) if last else 0.0
    boredom = min(1.0, 0.15 * math.log1p(idle_hours))
    details["boredom"] = {"idle_hours": round(idle_hours, 2), "last_interaction": last.isoformat() if last else None}

    weighted = []
    for q in repos.questions.open_lines():
        age_days = max(0.0, (now - _aware(q.created_at, now)).total_seconds() / 86400)
        weighted.append((q.priority * 0.5 ** (age_days / settings.question_half_life_days), q))
    weighted.sort(key=lambda pair: pair[0], reverse=True)
    total = sum(w for w, _ in weighted[:MAX_QUESTIONS])
    curiosity = 1 - math.exp(-total / 2)
    details["curiosity"] = {
        "open_questions": len(weighted),
        "weight": round(total, 3),
        "top_question": weighted[0][1].topic if weighted else None,
        "top_question_id": weighted[0][1].id if weighted else None,
    }

    goals = repos.goals.active_lines(limit=50)
    goal = max(goals, key=lambda g: (g.priority, -g.id), default=None)
    goal_level = 0.0
    if goal is not None:
        progress = repos.goals.progress(goal.id)
        completion = float(progress.get("completion_rate") or 0) / 100
        goal_level = (1 - math.exp(-max(0, goal.priority) / 3)) * (1 - 0.5 * completion)
        details["goal"] = {
            "goal_id": goal.id,
            "title": goal.title,
            "priority": goal.priority,
            "completion": round(completion, 2),
        }
    else:
        details["goal"] = {"goal_id": None}

    devotion_sum, latest = 0.0, None
    for entry in repos.emotion_log.recent("user", limit=50, since=now - timedelta(hours=48)):
        name = entry.emotion.lower()
        weight = 0.3 if name in NEGATIVE else 0.1 if name in POSITIVE else 0.0
        age_h = max(0.0, (now - _aware(entry.created_at, now)).total_seconds() / 3600)
        devotion_sum += weight * entry.strength / 3 * 0.5 ** (age_h / settings.devotion_half_life_hours)
        latest = entry
    details["devotion"] = {
        "user_emotion": latest.emotion if latest else None,
        "snippet": latest.snippet[:120] if latest else None,
    }
    levels = {"boredom": boredom, "curiosity": curiosity, "goal": goal_level, "devotion": min(1.0, devotion_sum)}
    levels = apply_adjustments(
        levels, details, repos.config.drive_adjustments, now, settings.adjustment_half_life_hours
    )
    return Drives({k: round(v, 3) for k, v in levels.items()}, details, now.isoformat())


class UnknownDrive(LookupError):
    pass


def adjustment_weight(at: datetime, now: datetime, half_life_hours: float) -> float:
    """How much of a human's setting made at `at` still holds at `now` (1 at first, halving every half-life)."""
    age_h = max(0.0, (now - _aware(at, now)).total_seconds() / 3600)
    weight: float = 0.5 ** (age_h / half_life_hours)  # typeshed's float ** float is Any (a negative base: complex)
    return weight


def apply_adjustments(
    levels: dict[str, float],
    details: dict[str, dict[str, Any]],
    adjustments: dict[str, Any],
    now: datetime,
    half_life_hours: float,
) -> dict[str, float]:
    """The computed levels with the human's settings applied, fading back; an adjusted drive's details say so."""
    adjusted = dict(levels)
    for name, setting in adjustments.items():
        if name not in levels or not isinstance(setting, dict):
            continue
        try:
            level, at = float(setting["level"]), datetime.fromisoformat(str(setting["at"]))
        except (KeyError, TypeError, ValueError):
            continue
        weight = adjustment_weight(at, now, half_life_hours)
        if weight < ADJUSTMENT_FADED:
            continue
        adjusted[name] = min(1.0, max(0.0, levels[name] + (level - levels[name]) * weight))
        details.setdefault(name, {})["adjusted"] = {
            "level": round(level, 3),
            "computed": round(levels[name], 3),
            "weight": round(weight, 3),
            "at": setting["at"],
            "by": setting.get("by") or "human",
        }
    return adjusted


def adjust_drive(
    repos: Repos, name: str, level: float, now: datetime, *, by: str = "human", computed: float | None = None
) -> dict[str, Any]:
    """Set a drive's level (it then fades back to the computed one); the change joins the history."""
    if name not in DRIVES:
        raise UnknownDrive(f"no drive {name!r}; the drives are {', '.join(DRIVES)}")
    setting = {"level": round(min(1.0, max(0.0, float(level))), 3), "at": now.isoformat(), "by": by}
    repos.config.drive_adjustments = {**repos.config.drive_adjustments, name: setting}
    change = {"drive": name, **setting, "computed": computed}
    history = repos.config.drive_adjustment_history
    repos.config.drive_adjustment_history = (history + [change])[-ADJUSTMENT_HISTORY_KEPT:]
    return change


def adjustment_history(repos: Repos) -> list[dict[str, Any]]:
    """The human's changes to the drives, newest last."""
    return repos.config.drive_adjustment_history


def reach_out_offer(
    drives: Drives,
    now: datetime,
    zone: tzinfo,
    settings: DriveSettings,
    *,
    quiet_hours: str,
    human_waiting: bool,
    last_offer_at: datetime | None,
) -> str | None:
    """None when the persona may write to its human now, else why not (the rule in the module doc)."""
    if not settings.reach_out:
        return "reaching out is off"
    if drives.dominant_level <= settings.reach_out_at:
        return f"strongest drive {drives.dominant} {drives.dominant_level:.2f} ≤ {settings.reach_out_at}"
    if in_quiet_hours(now, zone, quiet_hours):
        return f"quiet hours ({quiet_hours})"
    if human_waiting:
        return "the human is talking already"
    if last_offer_at is not None and now - _aware(last_offer_at, now) < timedelta(minutes=settings.cooldown_minutes):
        return f"cooldown: last offer at {last_offer_at:%H:%M}"
    return None


def feeling_lines(drives: Drives, settings: DriveSettings) -> list[str]:
    """The prompt's "how I feel" block: only drives at or above `inject_at`, strongest first."""
    lines = []
    for name in sorted(DRIVES, key=lambda n: drives.levels[n], reverse=True):
        level = drives.levels[name]
        if level < settings.inject_at:
            continue
        lines.append(f"{LABELS[name]} {level:.2f}: {describe(name, drives.details.get(name) or {})}")
    return lines


def internal_state_lines(drives: Drives, questions: Sequence[Any]) -> list[str]:
    """Nexus Ark's full internal-state log, for the tick the persona may reach out unprompted: every drive with
    its level and context (not only those at `inject_at`), the open questions (`topic`, `context`, `priority`),
    and the motivation line (the dominant drive and why)."""
    lines = [
        f"{LABELS[name]} {drives.levels.get(name, 0.0):.2f}: {describe(name, drives.details.get(name) or {})}"
        for name in sorted(DRIVES, key=lambda n: drives.levels.get(n, 0.0), reverse=True)
    ]
    lines += [
        f"open question (priority {float(q.priority):.1f}): {q.topic}" + (f" — {q.context}" if q.context else "")
        for q in questions[:MAX_QUESTIONS]
    ]
    dominant = drives.dominant
    lines.append(
        f"motivation: {LABELS[dominant]} leads at {drives.dominant_level:.2f}, because "
        f"{describe(dominant, drives.details.get(dominant) or {})}"
    )
    return lines


def describe(name: str, detail: dict[str, Any]) -> str:
    """The drive's context in words; a level the human set says so."""
    adjusted = detail.get("adjusted")
    by_human = f"; my human set it to {adjusted['level']:.2f}" if adjusted else ""
    return _context(name, detail) + by_human


def _context(name: str, detail: dict[str, Any]) -> str:
    if name == "boredom":
        return f"my human has been quiet for {detail.get('idle_hours', 0):.1f} h"
    if name == "curiosity":
        if not detail.get("top_question"):
            return "no open question holds me yet"
        return f"I keep wondering: {detail.get('top_question')}" + (
            f" ({detail['open_questions']} open questions)" if detail.get("open_questions", 0) > 1 else ""
        )
    if name == "goal":
        if detail.get("goal_id") is None:
            return "no active goal yet"
        return f'goal {detail.get("goal_id")} "{detail.get("title")}" is {int(100 * detail.get("completion", 0))}% done'
    if not detail.get("user_emotion"):
        return "my human's mood is not known lately"
    return f'my human seemed {detail.get("user_emotion")}: "{detail.get("snippet")}"'


def detect_user_emotion(text: str) -> tuple[str, int] | None:
    """(emotion, strength 1..5) from the lexicon, or None when it finds no emotion word."""
    hits = [(name, len(rx.findall(text))) for name, rx in _LEXICON_RE.items()]
    hits = [(name, n) for name, n in hits if n]
    if not hits:
        return None
    name = max(hits, key=lambda pair: (pair[1], pair[0] in NEGATIVE))[0]
    strength = min(5, 3 + len(_INTENSIFIERS.findall(text)) // 2 + (1 if sum(n for _, n in hits) > 1 else 0))
    return name, strength


USER_EMOTION_SCHEMA = {
    "type": "object",
    "properties": {
        "emotion": {"type": "string", "enum": USER_EMOTIONS},
        "strength": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["emotion", "strength"],
}

RESOLUTION_SCHEMA = {
    "type": "object",
    "properties": {
        "resolved": {
            "type": "array",
            "maxItems": MAX_QUESTIONS,
            "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "answer": {"type": "string", "maxLength": 300}},
                "required": ["id", "answer"],
            },
        }
    },
    "required": ["resolved"],
}


def emotion_ambiguous(text: str) -> bool:
    """A message the lexicon found no emotion in, but which may carry one: long enough and with a feeling cue
    (the speaker about themselves, a mood word, an exclamation, an emoticon). Only such a message costs a model
    call; a plain question or greeting is neutral."""
    return len(text.split()) >= LLM_MIN_WORDS and bool(_FEELING_CUES.search(text))


def classify_user_emotion(
    text: str, generate: Callable[[str, dict[str, Any]], str] | None, prompt: str
) -> tuple[str, int, str] | None:
    """(emotion, strength, method): the lexicon first; the model only for a message it says nothing about that
    still looks like it carries a feeling (`emotion_ambiguous`)."""
    found = detect_user_emotion(text)
    if found:
        return found[0], found[1], "lexicon"
    if generate is None or not emotion_ambiguous(text):
        return None
    data = json_object(
        generate(prompt.format(text=text[-1500:], emotions=", ".join(USER_EMOTIONS)), USER_EMOTION_SCHEMA)
    )
    emotion = str(data.get("emotion") or "").strip().lower()
    if emotion not in USER_EMOTIONS:
        return None
    try:
        strength = min(5, max(1, int(data.get("strength") or 3)))
    except (TypeError, ValueError):
        strength = 3
    return emotion, strength, "llm"


_CONTENT_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
_COMMON = frozenset(
    """that this what with have from they them their there about would could should which when
where your yours mine will been were into just like more some than then very much also only what's it's i'm
think thing things know want really today tonight something anything everything нибудь когда тебя меня чтобы
этот эта это есть было будет очень""".split()
)
STEM = 5  # words match on their first letters: "tides" touches "tide", "lighthouses" "lighthouse"
_SUFFIXES = ("ing", "es", "ed", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)][:STEM]
    return word[:STEM]


def content_stems(text: str) -> set[str]:
    """The text's content words (four letters or more, not the commonest), without a plural or -ing/-ed ending and
    cut to their first `STEM` letters."""
    return {_stem(w) for w in (m.group(0).lower() for m in _CONTENT_WORD.finditer(text)) if w not in _COMMON}


def touched_questions(conversation: str, questions: Sequence[Any]) -> list[Any]:
    """The open questions the conversation may have answered: those sharing a content word with it. Only these
    are put to the model; a conversation that touches none settles nothing and costs no call."""
    said = content_stems(conversation)
    return [q for q in questions if content_stems(f"{q.topic} {q.context or ''}") & said]


def parse_resolutions(raw: str, open_ids: set[int]) -> list[tuple[int, str]]:
    """The model's verdict on which open questions a conversation answered; unknown ids are ignored."""
    data = json_object(raw)
    found: list[tuple[int, str]] = []
    for item in data.get("resolved") or []:
        if not isinstance(item, dict):
            continue
        try:
            qid = int(item["id"])
        except (KeyError, TypeError, ValueError):
            continue
        answer = str(item.get("answer") or "").strip()
        if qid in open_ids and answer and qid not in {q for q, _ in found}:
            found.append((qid, answer))
    return found
