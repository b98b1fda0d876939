"""Plain words: the gate a small model's text passes before it reaches a later prompt, and the grammar that holds
it to words in the first place.

`is_prose` is the gate (dreams, free thoughts, replies); `degenerate` the narrower test the anti-stagnation reflex
uses on any model's thought (a run of `":":":"`, markup soup, no words). `prose_pattern` is the JSON-schema `pattern`
llama.cpp turns into a grammar: under it, the embedded 270M model writes sentences (bench/persona.py,
bench/converse.py count how often). `script_of` says which script a human's note is written in, so a reply can be
held to it.
"""

from __future__ import annotations

import re

# Letters of the scripts a persona may write in (Latin, Greek, Cyrillic, kana, CJK, Hangul) and plain
# punctuation — no digits, quotes, brackets or markup. Under a grammar, a small model fills a free string with
# numbers and tags; held to this, the embedded 270M model writes sentences.
PROSE_LETTERS = "A-Za-zÀ-ÖØ-öø-ɏͰ-ϿЀ-ӿ぀-ヿ㐀-䶿一-鿿가-힯"
PROSE_PUNCTUATION = ",.;:!?'()、。，！？・"  # no "-": runs of dashes are the next thing it fills a string with

# The letters of each script a note may be written in (script_of), for a reply held to the note's script.
SCRIPT_LETTERS = {
    "latin": "A-Za-zÀ-ÖØ-öø-ɏ",
    "cyrillic": "Ѐ-ӿ",
    "greek": "Ͱ-Ͽ",
    "japanese": "぀-ヿ㐀-䶿一-鿿",
    "chinese": "㐀-䶿一-鿿",
    "korean": "가-힯",
}
_SCRIPT_RANGES = {
    "cyrillic": re.compile("[\u0400-\u04ff]"),
    "greek": re.compile("[\u0370-\u03ff]"),
    "kana": re.compile("[\u3040-\u30ff]"),
    "han": re.compile("[\u3400-\u4dbf\u4e00-\u9fff]"),
    "korean": re.compile("[\uac00-\ud7af]"),
    "latin": re.compile("[A-Za-z\u00c0-\u024f]"),
}
_IDEOGRAPHS = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_MARKUP = re.compile(r"</?[a-z][^>]*>|[{}$#]{2,}|(.)\1{5,}")
_LOOP = re.compile(r"(.{1,6}?)\1{4,}", re.DOTALL)  # a short piece five or more times in a row: ":":":":":"


def prose_pattern(max_words: int, letters: str = PROSE_LETTERS) -> str:
    """Words joined by one space and at most two punctuation marks: no runs of spaces, dots or commas."""
    word, marks = f"[{letters}]+", f"[{PROSE_PUNCTUATION}]"
    return f"^{word}({marks}{{0,2}} {word}|{marks}{{1,2}}{word}){{0,{max_words - 1}}}{marks}{{0,2}}$"


def words_of(text: str) -> list[str]:
    """Lower-case words; kana/CJK have no spaces, so two of their characters count as one word."""
    ideographs = len(_IDEOGRAPHS.findall(text))
    return re.findall(r"[^\W\d_]+", _IDEOGRAPHS.sub(" ", text.lower())) + ["文"] * (ideographs // 2)


def is_prose(text: str, min_words: int = 3) -> bool:
    """Words, mostly letters, no markup, not one word over and over: what may go into every later prompt."""
    ideographs = len(_IDEOGRAPHS.findall(text))
    words = words_of(text)
    visible = [ch for ch in text if not ch.isspace()]
    letters = sum(ch.isalpha() for ch in visible) / max(1, len(visible))
    varied = ideographs > 0 or len(words) < 8 or len(set(words)) / len(words) >= 0.3
    return len(words) >= min_words and letters >= 0.7 and varied and not _MARKUP.search(text)


def degenerate(text: str, acted: bool = False) -> str | None:
    """Why a thought is no thought at all — a short piece repeated over a fifth of it, under a quarter of it
    letters, or fewer than two words with no command beside them (`acted`: "Hi." before a messages.send is an
    act) — or None. Narrower than `is_prose`: a real model's headings, lists and code pass."""
    stripped = text.strip()
    if not stripped:
        return None
    looped = sum(len(m.group(0)) for m in _LOOP.finditer(stripped) if not m.group(1).isalpha())
    if looped >= max(12, len(stripped) // 5):
        return f"a short piece repeated over {looped} of its {len(stripped)} characters"
    visible = [ch for ch in stripped if not ch.isspace()]
    letters = sum(ch.isalpha() for ch in visible) / max(1, len(visible))
    if len(visible) >= 12 and letters < 0.25:
        return f"only {letters:.0%} of it letters"
    if len(words_of(stripped)) < 2 and not acted:
        return "fewer than two words"
    return None


def script_of(text: str) -> str:
    """The script most of the text's letters are in: latin, cyrillic, greek, japanese, chinese or korean."""
    counts = {name: len(pattern.findall(text)) for name, pattern in _SCRIPT_RANGES.items()}
    if counts["kana"]:
        return "japanese"
    counts["chinese"] = counts.pop("han")
    counts.pop("kana")
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] else "latin"
