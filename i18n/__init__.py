"""The languages of the web app and of the persona's fixed prompt texts: English (the source: every msgid is the
English text), Japanese and Russian — the languages the source designs are written in.

Standard machinery: GNU gettext catalogues (`i18n/locales/<lang>/LC_MESSAGES/<domain>.po`) kept by Babel
(`babel.cfg`, `make i18n-extract` / `make i18n-update`), read by Jinja2's i18n extension in the templates and by
`text()` in Python. Two domains: `web` (pages, fragments, messages the web shows people) and `prompts` (the
persona's fixed prompt texts). The .po files are read directly and compiled in memory (Babel's `read_po` then
`write_mo` into a buffer) once per process at first use: no build step to forget, no binary .mo in the repository
or out of date with its .po, nothing fetched — a fresh clone speaks every language (its cost: docs/languages.md).

Which language: `negotiate()` for a browser (the page's switcher, a cookie, first; then the `language` setting
unless it is `auto`; then Accept-Language); `of_text()` for a human's note whose author names no language
(the script its letters are in: Cyrillic → ru, kana → ja, Latin → en — a count of characters, no model).
"""

from __future__ import annotations

import gettext
import re
import unicodedata
from functools import cache
from io import BytesIO
from pathlib import Path

LANGUAGES: tuple[str, ...] = ("en", "ja", "ru")
SOURCE = "en"  # the msgids' language: no catalogue
NAMES = {"en": "English", "ja": "日本語", "ru": "Русский"}  # each in itself, for the page's switcher
DOMAINS = ("web", "prompts")
LOCALES = Path(__file__).parent / "locales"
COOKIE = "anima_lang"  # the page's switcher remembers the choice here


def N_(message: str) -> str:
    """Mark a text for the catalogue (pybabel extracts it) where it is defined; translate it where it is used."""
    return message


def supported(code: str | None) -> str | None:
    """`code` (e.g. 'ru-RU', 'ja_JP', 'EN') as one of LANGUAGES, or None."""
    if not code:
        return None
    base = re.split(r"[-_]", code.strip().lower(), maxsplit=1)[0]
    return base if base in LANGUAGES else None


def accepted(header: str | None) -> list[str]:
    """The languages of an Accept-Language header we have, best first (RFC 9110 q-values; `*` and q=0 ignored).
    Starlette has no parser for it and Babel's `negotiate_locale` wants the list already ordered: this orders it."""
    ranked: list[tuple[float, int, str]] = []
    for position, part in enumerate((header or "").split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        match = re.search(r"q\s*=\s*([0-9.]+)", params)
        if match:
            try:
                quality = float(match.group(1))
            except ValueError:
                quality = 0.0
        code = supported(tag)
        if code and quality > 0:
            ranked.append((-quality, position, code))
    return list(dict.fromkeys(code for _, _, code in sorted(ranked)))


def negotiate(*, chosen: str | None = None, setting: str | None = None, accept_language: str | None = None) -> str:
    """The web app's language for a request: the one chosen in the page (its cookie), else the `language`
    setting when it names one (not `auto`), else the browser's preference, else English."""
    for candidate in (supported(chosen), supported(setting) if setting != "auto" else None, *accepted(accept_language)):
        if candidate:
            return candidate
    return SOURCE


SCRIPT_LANGUAGE = {"CYRILLIC": "ru", "HIRAGANA": "ja", "KATAKANA": "ja", "LATIN": "en"}


def of_text(text: str) -> str | None:
    """The language a text is most likely in, from its letters alone: any kana → ja; else the script most letters
    are in (Cyrillic → ru, Latin → en); None for no letters or another script (e.g. CJK without kana). Cheap (one
    pass over the characters, no model) and right for what we have catalogues for; a Ukrainian note reads as ru."""
    counts: dict[str, int] = {}
    for char in text:
        if not char.isalpha():
            continue
        script = unicodedata.name(char, "").split(" ", 1)[0]
        counts[script] = counts.get(script, 0) + 1
    if counts.get("HIRAGANA") or counts.get("KATAKANA"):
        return "ja"
    if not counts:
        return None
    return SCRIPT_LANGUAGE.get(max(counts, key=lambda k: counts[k]))


def catalogue_path(language: str, domain: str) -> Path:
    return LOCALES / language / "LC_MESSAGES" / f"{domain}.po"


@cache
def translations(language: str, domain: str) -> gettext.NullTranslations:
    """The catalogue of `domain` in `language`, compiled from its .po at first use (cached for the process);
    English, or a language without a catalogue: the msgids themselves. Fuzzy entries are not used."""
    code = supported(language)
    if code is None or code == SOURCE or not catalogue_path(code, domain).exists():
        return gettext.NullTranslations()
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    with catalogue_path(code, domain).open("rb") as po:
        catalog = read_po(po, locale=code, domain=domain)
    buffer = BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


def text(message: str, language: str | None, domain: str = "prompts") -> str:
    """`message` (its English msgid) in `language`; the English itself when the catalogue has no translation."""
    return translations(language or SOURCE, domain).gettext(message)
