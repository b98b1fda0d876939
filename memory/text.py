"""Text processing for retrieval: tokens for BM25 and the chunks that get their own vectors.

Tokens: lower-cased words without stop words, Snowball-stemmed (English for Latin script, Russian for
Cyrillic); runs of CJK characters become overlapping character bigrams, since they have no spaces. "may" is
kept: it is a month too, and dates are indexed as words ("3 May 2024").
Chunks: sentences of at least three words (shorter ones join their neighbour), at most `max_chunks`
per item, so a long message is found by its best sentence instead of its average.
"""

from __future__ import annotations

import re
from datetime import date
from functools import lru_cache
from typing import Any

STOP_WORDS = frozenset(
    """
a an the and or but if of at by for with about against between into through during before after above below to
from up down in out on off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very s t can will just don should now i me my
myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers herself it its
itself they them their theirs themselves what which who whom this that these those am is are was were be been
being have has had having do does did doing would could ought also let shall might must
и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было вот от меня
еще нет о из ему теперь когда даже ну вдруг ли если уже или ни быть был него до вас нибудь опять уж вам ведь там
потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам чтоб без будто чего раз тоже себе
под будет ж тогда кто этот того потому этого какой совсем ним здесь этом один почти мой тем чтобы нее сейчас были
куда зачем всех никогда можно при наконец два об другой хоть после над больше тот через эти нас про всего них какая
много разве три эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более всегда конечно
всю между
""".split()
)

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")
_APOSTROPHE = re.compile(r"['’]")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")


@lru_cache(maxsize=4)
def _stemmer(language: str) -> Any:
    import Stemmer  # PyStemmer: C Snowball stemmers

    return Stemmer.Stemmer(language)


def tokenize(text: str) -> list[str]:
    """BM25 tokens of a text (see the module doc)."""
    tokens: list[str] = []
    latin: list[str] = []
    cyrillic: list[str] = []
    for run in _CJK.findall(text):
        tokens.extend(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    lowered = text.lower()
    any_cyrillic = _CYRILLIC.search(lowered) is not None  # else no word needs the per-word check
    for word in _WORD.findall(_CJK.sub(" ", lowered) if _CJK.search(lowered) else lowered):
        if "'" in word or "’" in word:
            word = _APOSTROPHE.split(word, maxsplit=1)[0]  # caroline's -> caroline, don't -> don
        if not word or word in STOP_WORDS:
            continue
        (cyrillic if any_cyrillic and _CYRILLIC.search(word) else latin).append(word)
    if latin:
        tokens.extend(_stemmer("english").stemWords(latin))
    if cyrillic:
        tokens.extend(_stemmer("russian").stemWords(cyrillic))
    return tokens


def date_words(value: date | None) -> str:
    """A date as the words a question would use for it: "9 October 2022"."""
    return f"{value.day} {value:%B %Y}" if value is not None else ""


def lexical_document(
    *,
    created_at: date | None,
    author: str,
    title: str,
    text: str,
    context_before: str = "",
    context_after: str = "",
    event_at: date | None = None,
    expansion: str = "",
) -> tuple[str, str]:
    """What the full-text index stores for an item, already tokenised (space-separated BM25 tokens): its own words
    (date, author, title, text; the date of its event time when it has one, memory/event_time.py, and its
    index-time expansion, memory/expansion.py) and its neighbours' (the exchange a message belongs to, weighted
    lower)."""
    happened = date_words(event_at) if event_at is not None else ""
    own = tokenize(f"{date_words(created_at)} {happened} {author} {title} {text} {expansion}")
    context = tokenize(f"{context_before or ''}\n{context_after or ''}")
    return " ".join(own), " ".join(context)


def sentences(text: str, min_words: int = 3) -> list[str]:
    """Sentences of `text`; one shorter than `min_words` joins the next (or the previous, at the end)."""
    parts = [p.strip() for p in _SENTENCE_END.split(text) if p and p.strip()]
    merged: list[str] = []
    carry = ""
    for part in parts:
        part = f"{carry} {part}".strip() if carry else part
        if len(part.split()) < min_words and len(_CJK.sub("", part)) == len(part):
            carry = part
            continue
        merged.append(part)
        carry = ""
    if carry:
        if merged:
            merged[-1] = f"{merged[-1]} {carry}"
        else:
            merged.append(carry)
    return merged


def chunks(text: str, max_chunks: int = 12, max_chars: int = 600) -> list[str]:
    """The pieces of a text that get their own vector: its sentences, grouped so there are at most
    `max_chunks`, each cut at `max_chars`. A text of one sentence has no chunks (its whole vector serves)."""
    parts = sentences(text)
    if len(parts) <= 1:
        return []
    if len(parts) > max_chunks:
        size = -(-len(parts) // max_chunks)
        parts = [" ".join(parts[i : i + size]) for i in range(0, len(parts), size)]
    return [p[:max_chars] for p in parts]


PART_CHARS = 600  # a sentence longer than this gets a vector per piece of about this many characters
WRITTEN_CHARS = 8000  # of a longer text, the write embeds the parts in its first WRITTEN_CHARS (bounded whatever
# the length), the follow-up the rest (memory/followup.py)
MAX_PARTS = 2000  # a text of more parts gets them grouped (a 300,000-character paste: ~3,000 sentences)


def pieces(text: str, size: int = PART_CHARS) -> list[str]:
    """`text` cut at spaces into pieces of at most about `size` characters (a word longer than that is cut)."""
    found, at = [], 0
    while at < len(text):
        end = min(len(text), at + size)
        if end < len(text):
            space = text.rfind(" ", at + size // 2, end)
            end = space if space > at else end
        if piece := text[at:end].strip():
            found.append(piece)
        at = end
    return found


def parts(text: str, max_parts: int = MAX_PARTS) -> list[str]:
    """The pieces of a text that get their own vector, in order: its sentences (memory/retrieval/embeddings.py pools
    each from the pass over its window of the text), a long one in pieces of PART_CHARS, grouped when there are
    more than `max_parts`. A text of one sentence has none: its whole vector serves."""
    found = [
        piece
        for sentence in sentences(text)
        for piece in (pieces(sentence) if len(sentence) > PART_CHARS else [sentence])
    ]
    if len(found) <= 1:
        return []
    if len(found) > max_parts:
        size = -(-len(found) // max_parts)
        found = [" ".join(found[i : i + size]) for i in range(0, len(found), size)]
    return found


def split_written(found: list[str], limit: int = WRITTEN_CHARS) -> tuple[list[str], list[str]]:
    """A text's parts split into those the write embeds (the parts that start in its first `limit` characters,
    counted as the parts' lengths) and those the follow-up embeds after it."""
    used = 0
    for n, part in enumerate(found):
        if used >= limit:
            return found[:n], found[n:]
        used += len(part) + 1
    return found, []


def with_author(author: str, text: str) -> str:
    return f"{author}: {text}" if author else text


def emotion_strengths(emotions: list[str]) -> list[tuple[str, int]]:
    """["joy:4 (reason)", …] -> [("joy", 4), …]"""
    found = []
    for text in emotions or []:
        name, _, rest = str(text).partition(":")
        digits = "".join(ch for ch in rest[:3] if ch.isdigit())
        if name.strip():
            found.append((name.strip().lower(), int(digits) if digits else 3))
    return found


def emotion_score(emotions: list[str]) -> float:
    """0..1: the strongest emotion's strength / 5 (an emotion without a strength counts 3)."""
    return max((s for _, s in emotion_strengths(emotions)), default=0) / 5
