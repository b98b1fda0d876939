"""Event time: when what a memory tells happened, kept apart from its record time (when it was stored,
`memory_items.created_at`).

A memory gets an event time when its source gives one (`MemoryItemRepo.put(event_at=…)`) or its text says when:
"yesterday", "last Tuesday", "three weeks ago", "on 9 May 2023", "in March", "last summer" is not one (too vague to
point at a day, a week, a month or a year). The expressions are found by the patterns below (English, Russian and
Japanese, the personas' languages: a short list of what people say, so a number or the verb "may" is not taken for
a date); what each one means is resolved by dateparser (a maintained parser of absolute and relative dates in
200 languages) against the record time, so "last Tuesday" said on Thursday 11 May 2023 is Tuesday 9 May 2023. The
first expression a text names wins. A memory without an event time happened, as far as anyone can tell, when it was
recorded: recall's event-time filter (`Query.happened_since/until`) reads `event_at`, else `created_at`.

The resolution costs ~0.5 s to load dateparser's language data once, then ~1 ms an expression: it runs in the memory
index's follow-up thread (memory/followup.py), never on the tick's path.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|"
    r"apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d\d"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_COUNT = r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|couple of|few|several)"
_UNIT = r"(?:day|week|month|year)s?"

# (pattern, precision), most specific first: the earliest match in the text wins, and among matches at the same
# place the longer one.
PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.IGNORECASE), precision)
    for p, precision in [
        (rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", "day"),
        (rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", "day"),
        (r"\b(?:19|20)\d\d-\d\d-\d\d\b", "day"),
        (rf"\b(?:on\s+)?(?:the\s+)?{_DAY}\s+of\s+{_MONTH}\b", "day"),
        (rf"\b(?:on\s+)?{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)\b", "day"),
        (rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", "month"),
        (r"\bthe day before yesterday\b", "day"),
        (r"\b(?:yesterday|last night)\b", "day"),
        (r"\b(?:today|tonight|this morning|this afternoon|this evening)\b", "day"),
        (r"\btomorrow\b", "day"),
        (rf"\b(?:last|this past|past|on|next|this coming)\s+{_WEEKDAY}\b", "day"),
        (r"\b(?:last|this past|past)\s+weekend\b", "week"),
        (rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", "relative"),
        (r"\b(?:last|next)\s+(?:week|month|year)\b", "relative"),
        (rf"\bin\s+{_MONTH}(?!\s*\d)\b", "month"),
        (rf"\b(?:in|since|during)\s+{_YEAR}\b", "year"),
        # Russian
        (r"(?<!\w)(?:позавчера|вчера|сегодня|завтра)(?!\w)", "day"),
        (
            r"(?<!\w)(?:в\s+)?(?:прошл(?:ый|ую|ое)|эт(?:от|у))\s+(?:понедельник|вторник|среду|четверг|пятницу|субботу|"
            r"воскресенье)(?!\w)",
            "day",
        ),
        (
            r"(?<!\w)(?:\d+|два|две|три|четыре|пять|несколько)?\s*(?:день|дня|дней|недел[юиь]|недель|месяц|месяца|месяцев|"
            r"год|года|лет)\s+назад(?!\w)",
            "relative",
        ),
        (r"(?<!\w)на\s+прошлой\s+неделе(?!\w)|(?<!\w)в\s+прошлом\s+(?:месяце|году)(?!\w)", "relative"),
        # Japanese
        (r"一昨日|おととい|昨日|きのう|今日|きょう|明日|あした", "day"),
        (r"先週の?[月火水木金土日]曜日?", "day"),
        (r"\d+\s*(?:日|週間|か月|ヶ月|年)前", "relative"),
        (r"先週|先月|去年|昨年", "relative"),
    ]
]

_NUMBERS = {
    "a": "1",
    "an": "1",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "a few": "3",
    "few": "3",
    "a couple of": "2",
    "couple of": "2",
    "several": "4",
}
_RU_NUMBERS = {"два": "2", "две": "2", "три": "3", "четыре": "4", "пять": "5", "несколько": "3"}


@dataclass(frozen=True)
class EventTime:
    at: datetime  # UTC; the start of the day, week, month or year it names
    phrase: str  # the words that said it
    precision: str  # day | week | month | year


def find_phrase(text: str) -> tuple[str, str] | None:
    """The first time expression `text` names, and what kind (module doc); None when it names none."""
    best: tuple[int, int, str, str] | None = None
    for pattern, precision in PATTERNS:
        m = pattern.search(text)
        if m and m.group(0).strip() and (best is None or (m.start(), -len(m.group(0))) < (best[0], -best[1])):
            best = (m.start(), len(m.group(0)), m.group(0).strip(), precision)
    return None if best is None else (best[2], best[3])


def _normalised(phrase: str) -> tuple[str, str]:
    """The phrase as dateparser reads it best, and which way it points ("past" | "future")."""
    p = re.sub(r"\s+", " ", phrase.lower().strip())
    p = re.sub(r"^(?:on|in|since|during) (?:the )?", "", p)
    direction = "future" if re.match(r"^(?:next|this coming|tomorrow|завтра|明日|あした)", p) else "past"
    p = re.sub(r"^(?:last|this past|past|next|this coming) (?=" + _WEEKDAY + r")", "", p)
    p = re.sub(r"^(?:last|this past|past) weekend$", "saturday", p)
    p = p.replace("the day before yesterday", "2 days ago").replace("last night", "yesterday")
    p = re.sub(r"^(this morning|this afternoon|this evening|tonight)$", "today", p)
    for word, digit in sorted(_NUMBERS.items(), key=lambda kv: -len(kv[0])):
        p = re.sub(rf"^{word} (?=(?:day|week|month|year)s? ago)", f"{digit} ", p)
    p = re.sub(r"(\d+) (day|week|month|year)s? ago", lambda m: f"{m.group(1)} {m.group(2)}s ago", p)
    for word, digit in _RU_NUMBERS.items():
        p = re.sub(rf"^{word} ", f"{digit} ", p)
    p = re.sub(r"^(?:в )?(?:прошл(?:ый|ую|ое)|эт(?:от|у)) ", "", p)  # "в прошлый вторник": the last Tuesday
    p = re.sub(r"^先週の?", "", p) if re.search(r"曜", p) else p  # 先週の火曜日: the last Tuesday
    return p, direction


_LOCK = threading.Lock()


def resolve(phrase: str, recorded_at: datetime) -> datetime | None:
    """What `phrase` means said at `recorded_at` (UTC); None when dateparser cannot say."""
    import dateparser

    base = recorded_at if recorded_at.tzinfo is None else recorded_at.astimezone(UTC).replace(tzinfo=None)
    text, direction = _normalised(phrase)
    with _LOCK:  # dateparser's caches are shared: one resolution at a time
        found = dateparser.parse(
            text,
            languages=["en", "ru", "ja"],
            settings={
                "RELATIVE_BASE": base,
                "PREFER_DATES_FROM": direction,
                "PREFER_DAY_OF_MONTH": "first",
                "RETURN_AS_TIMEZONE_AWARE": False,
            },
        )
    return None if found is None else found.replace(tzinfo=UTC)


def event_time(text: str, recorded_at: datetime) -> EventTime | None:
    """The event time `text` names, resolved against its record time (module doc); None when it names none."""
    said = find_phrase(text or "")
    if said is None:
        return None
    phrase, kind = said
    at = resolve(phrase, recorded_at)
    if at is None:
        return None
    precision = kind
    if kind == "relative":
        precision = (
            "day"
            if re.search(r"day|дн|день|дня|日前", phrase, re.IGNORECASE)
            else "week"
            if re.search(r"week|недел|週", phrase, re.IGNORECASE)
            else "month"
            if re.search(r"month|месяц|月", phrase, re.IGNORECASE)
            else "year"
        )
    start = at.replace(hour=0, minute=0, second=0, microsecond=0)
    if precision == "month":
        start = start.replace(day=1)
    elif precision == "year":
        start = start.replace(month=1, day=1)
    elif precision == "week":
        start = start - timedelta(days=start.weekday())
    return EventTime(start, phrase, precision)


def period_end(at: datetime, precision: str) -> datetime:
    """The end of the period an event time starts (exclusive)."""
    if precision == "year":
        return at.replace(year=at.year + 1)
    if precision == "month":
        return (at.replace(day=1) + timedelta(days=32)).replace(day=1)
    return at + timedelta(days=7 if precision == "week" else 1)
