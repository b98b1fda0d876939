"""What a query says besides its words, read without a model: who it is about and when.

- `about_author`: the one known author a query names ("what did Caroline…"); `first_person` rewrites the query as
  that author would have said it, since memories are stored as "<author>: <text>". `named_authors`: every known
  author a query names; `subjects`: those of them it asks about ("Jon and Gina", or else the first named).
- `time_ranges`: the periods a query names — a day ("on 9 October, 2022", "May 25th 2023"), a month ("in May
  2023"), a year ("in 2022"), or a recent one relative to now ("yesterday", "last week", "three days ago"; "last
  year" is too wide to point at anything).
- `asks_when`: a "when …?" / "how long ago …?" query; its answer is an item that says when (`says_when`: a time
  expression such as "yesterday", "last Friday", "next month", "in 2019", or a date: "on 14 June", "June 14th").
- `asks_something`: an item that is a question ("Did you paint that?"), which tells less than the reply to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memory.text import sentences

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = (
    r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|"
    r"jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
_IN_YEAR = re.compile(rf"\b(?:in|of|during|since|throughout)\s+{_YEAR}\b", re.IGNORECASE)
_NUMBER = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "few": 3,
    "couple": 2,
    "several": 4,
}
_UNIT_DAYS = {"day": 1, "week": 7}
_AGO = re.compile(
    r"\b(\d+|a|an|one|two|three|four|five|six|seven|few|couple|several)\s+(?:of\s+)?(day|week)s?\s+ago\b", re.IGNORECASE
)
_RELATIVE = re.compile(
    r"\b(yesterday|today|tonight|this morning|last night|(?:last|this|past) (?:week|weekend))\b", re.IGNORECASE
)  # "last month", "last year": too wide to say which memories

_ASKS_WHEN = re.compile(
    r"^\W*(?:when|how long ago|how long has|how long did|what (?:year|month|day|date|time))\b|"
    r"\b(?:when did|when was|when is|when will|when does|what date|which (?:year|month|day))\b",
    re.IGNORECASE,
)
_SAYS_WHEN = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|ago|since|weekend|"
    r"(?:last|next|this|past|coming) (?:week|weekend|month|year|night|summer|winter|spring|fall|autumn|morning|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(?:few|couple of|two|three) (?:days|weeks|months|years)|"
    r"in (?:january|february|march|april|may|june|july|august|september|october|november|december)|"
    r"\d{1,2}(?:st|nd|rd|th)? (?:of )?(?:january|february|march|april|may|june|july|august|september|october|"
    r"november|december)|(?:january|february|march|april|june|july|august|september|october|november|december) "
    r"\d{1,2}(?:st|nd|rd|th)?|"
    r"(?:19|20)\d\d|just (?:got|started|finished|joined|bought|went|moved|came|had|made|did))\b"
)  # of lowered text:
# matching case-sensitively is 2.7× faster than IGNORECASE (a "when …?" query reads it of every item it ranks)


@dataclass(frozen=True)
class TimeRange:
    start: datetime
    end: datetime
    weight: float = 1.0  # how much the range says: a day fully, a month half, a year a quarter


def about_author(text: str, authors: Iterable[str | None]) -> str | None:
    """The one known author `text` names (none when it names several or none, or only one author is known)."""
    known = [a for a in authors if a]
    if len(known) < 2:
        return None
    named = [a for a in known if re.search(rf"\b{re.escape(a)}\b", text, re.IGNORECASE)]
    return named[0] if len(named) == 1 else None


def named_authors(text: str, authors: Iterable[str | None]) -> list[str]:
    """The known authors `text` names, in the order it names them (none when only one author is known)."""
    known = [a for a in authors if a]
    if len(known) < 2:
        return []
    found: dict[str, int] = {}
    for a in known:
        if m := re.search(rf"\b{re.escape(a)}\b", text, re.IGNORECASE):
            found[a] = m.start()
    return sorted(found, key=found.__getitem__)


def subjects(text: str, named: list[str]) -> list[str]:
    """Of the authors a query names, those it asks about: all of them when they are joined ("Jon and Gina",
    "both Jon and Gina", "Jon or Gina"), else the first ("What did Melanie say about Caroline's painting?")."""
    if len(named) <= 1:
        return named
    joined = "|".join(re.escape(a) for a in named)
    pair = re.compile(rf"\b({joined})(?:['’]s)?\s*(?:,\s*|\s+(?:and|or|&)\s+)(?:both\s+)?({joined})\b", re.IGNORECASE)
    together = {n.lower() for m in pair.finditer(text) for n in m.groups()}
    if together:
        return [a for a in named if a.lower() in together]
    return named[:1]


_SELF = re.compile(
    r"(?:\b(?:i|me|my|mine|myself|i['’](?:m|ve|d|ll))\b|(?<!\w)(?:я|меня|мне|мной|мой|моя|моё|мое|мои|"
    r"моего|моей|моих|себя)(?!\w)|私|僕|俺)",
    re.IGNORECASE,
)


_ADDRESSEE = re.compile(
    r"(?:\b(?:you|your|yours|yourself|you['’](?:ve|d|ll|re))\b|(?<!\w)(?:ты|тебя|тебе|тобой|твой|твоя|"
    r"твоё|твое|твои|вы|вас|вам|вами|ваш|ваша|ваше|ваши)(?!\w)|あなた|君)",
    re.IGNORECASE,
)
_REQUEST = re.compile(
    r"^\W*(?:(?:can|could|would|will)\s+you|please)\b", re.IGNORECASE
)  # "can you tell me …": a request


def speaks_of_self(text: str) -> bool:
    """Whether a query speaks of its asker in the first person singular ("what did I say", "мой", "私")."""
    return _SELF.search(text) is not None


def speaks_to_addressee(text: str) -> bool:
    """Whether a query speaks of the one it asks in the second person ("what did you recommend?"), besides asking
    them to do something ("Can you summarise …" is a request, not a question about their words)."""
    return _ADDRESSEE.search(_REQUEST.sub("", text, count=1)) is not None


def first_person(text: str, author: str) -> str:
    """`text` as `author` would have said it: "What did Caroline research?" -> "Caroline: What did I research?"."""
    name = re.escape(author)
    text = re.sub(rf"\b{name}['’]s\b", "my", text, flags=re.IGNORECASE)
    text = re.sub(rf"\b{name}\b", "I", text, flags=re.IGNORECASE)
    return f"{author}: {text}"


def _month(word: str) -> int:
    return next(n for n, name in enumerate(MONTHS, 1) if name.startswith(word.lower().rstrip(".")[:3]))


def _day(year: int, month: int, day: int) -> TimeRange | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # "31 February"
        return None
    return TimeRange(start, start + timedelta(days=1))


def time_ranges(text: str, now: datetime) -> list[TimeRange]:
    """The periods `text` names (module doc), most specific first; relative ones counted back from `now`."""
    found = [r for d, m, y in _DAY_MONTH_YEAR.findall(text) if (r := _day(int(y), _month(m), int(d)))]
    found += [r for m, d, y in _MONTH_DAY_YEAR.findall(text) if (r := _day(int(y), _month(m), int(d)))]
    if not found:
        for m, y in _MONTH_YEAR.findall(text):
            start = datetime(int(y), _month(m), 1, tzinfo=UTC)
            found.append(TimeRange(start, (start + timedelta(days=32)).replace(day=1), 0.5))
    if not found:
        found += [
            TimeRange(datetime(int(y), 1, 1, tzinfo=UTC), datetime(int(y) + 1, 1, 1, tzinfo=UTC), 0.25)
            for y in _IN_YEAR.findall(text)
        ]
    now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    for phrase in _RELATIVE.findall(text):
        phrase = phrase.lower()
        if phrase == "yesterday" or phrase == "last night":
            found.append(TimeRange(today - timedelta(days=1), today + timedelta(hours=6)))
        elif phrase in ("today", "tonight", "this morning"):
            found.append(TimeRange(today, today + timedelta(days=1)))
        else:
            days = {"week": 7, "weekend": 4}[phrase.split()[1]]
            found.append(TimeRange(now - timedelta(days=days * (1 if phrase.startswith("this") else 2)), now))
    for count, unit in _AGO.findall(text):
        n = int(count) if count.isdigit() else _NUMBER.get(count.lower(), 1)
        centre = now - timedelta(days=n * _UNIT_DAYS[unit.lower()])
        slack = timedelta(days=max(1, n * _UNIT_DAYS[unit.lower()] // 4))
        found.append(TimeRange(centre - slack, centre + slack))
    return found


def asks_when(text: str) -> bool:
    return bool(_ASKS_WHEN.search(text))


def says_when(text: str) -> bool:
    return bool(_SAYS_WHEN.search(text.lower()))


def asks_something(text: str) -> bool:
    return text.rstrip().endswith("?")


_CLAUSE = re.compile(r"\s*[,;:\u2014\u2013]\s+|\s+-\s+")
_INTERROGATIVE = re.compile(
    r"^(?:what|how|why|when|where|which|who|whom|whose|is|are|was|were|am|do|does|did|can|could|would|will|should|"
    r"shall|may|might|must|have|has|had|isn['’]t|aren['’]t|don['’]t|doesn['’]t|didn['’]t|won['’]t|any|anything|or|"
    r"что|как|почему|зачем|когда|где|куда|откуда|какой|какая|какое|какие|кто|чем|сколько|можно|ли)\b",
    re.IGNORECASE,
)


def asking_clause(sentence: str) -> str:
    """The part of a question sentence that asks: from the last clause that opens with a question word ("I prefer a
    balanced approach, using AI but keeping oversight, what do you think?" → "what do you think?"); the whole
    sentence when no later clause does."""
    clauses = _CLAUSE.split(sentence)
    for n in range(len(clauses) - 1, 0, -1):
        if _INTERROGATIVE.match(clauses[n]):
            return " ".join(clauses[n:])
    return sentence


def asking_share(text: str) -> float:
    """How much of a text that ends with a question only asks: the share of its words in what its question
    sentences ask ("Is it far?" 1; "The studio is in Lisbon. Does daylight saving matter?" 0.5: it also states
    where; "I moved to Lisbon in May, how is the weather?" 0.4); 0 when it does not end with one."""
    if not asks_something(text):
        return 0.0
    parts = sentences(text) or [text]
    words = sum(len(p.split()) for p in parts)
    asking = sum(len(asking_clause(p).split()) for p in parts if p.rstrip().endswith("?"))
    return asking / max(1, words)
