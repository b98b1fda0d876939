"""The languages (i18n/): every marked text of the web app and every fixed prompt text has its Japanese and Russian
in the catalogues with the same placeholders; pages render in the browser's language, the page's choice (a cookie)
or the `language` setting; the tick's prompt is assembled in the language of the human it answers."""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir, extract_from_file
from babel.messages.pofile import read_po

import i18n
from nodes.steps.prompts import COMMANDS_GUIDE, CONTINUATION_HUMAN_TURN, DATA_RULE, HUMAN_WRITES
from persona.prompts import REPLY_HUMAN, REPLY_PROMPT
from persona.settings import Overrides, Settings, load_settings
from tests.fakes.llm import FakeLLM

ROOT = Path(__file__).resolve().parents[2]
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None}
METHODS = [("**/templates/**.html", "jinja2"), ("**.py", "python")]
OPTIONS = {"**/templates/**.html": {"extensions": "jinja2.ext.i18n"}}
PYTHON_FORMAT = re.compile(r"%\((\w+)\)[sdr]")
BRACES = re.compile(r"(?<!\{)\{([a-z_]+)(?::[^{}]*)?\}(?!\})")


def _sources(variable: str) -> list[str]:
    """The sources the Makefile's i18n-extract reads for a domain (one list, so the test and the make target agree)."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    return re.search(rf"^{variable} = (.+)$", text, re.M).group(1).split()


def extracted(domain: str) -> set[str | tuple[str, str]]:
    """Every msgid the code marks today, extracted as `make i18n-extract` does (Babel's extractors)."""
    found: set[str | tuple[str, str]] = set()
    for source in _sources("WEB_SOURCES" if domain == "web" else "PROMPT_SOURCES"):
        path = ROOT / source
        if path.is_dir():
            messages = (m[2] for m in extract_from_dir(path, METHODS, OPTIONS, keywords=KEYWORDS))
        else:
            messages = (m[1] for m in extract_from_file("python", path, keywords=KEYWORDS))
        found.update(m if isinstance(m, str) else tuple(m[:2]) for m in messages)
    return found


def catalogue(language: str, domain: str):
    with i18n.catalogue_path(language, domain).open("rb") as po:
        return read_po(po, locale=language, domain=domain)


@pytest.mark.parametrize("domain", i18n.DOMAINS)
@pytest.mark.parametrize("language", ["ja", "ru"])
def test_every_marked_text_is_translated_with_its_placeholders_intact(language, domain):
    marked = extracted(domain)
    assert len(marked) > (300 if domain == "web" else 60)  # the extraction found the code's texts
    messages = {m.id if isinstance(m.id, str) else tuple(m.id): m for m in catalogue(language, domain) if m.id}
    missing = sorted(str(m) for m in marked if m not in messages)
    assert not missing, f"{language}/{domain}.po misses (make i18n-update, then translate): {missing[:10]}"
    for key in marked:
        message = messages[key]
        ids = [key] if isinstance(key, str) else list(key)
        strings = [message.string] if isinstance(message.string, str) else list(message.string)
        assert not message.fuzzy and all(s.strip() for s in strings), f"{language}: untranslated {key!r}"
        for translated in strings:
            if domain == "web":  # Jinja's newstyle gettext %-formats every text: placeholders and %% must survive
                assert set(PYTHON_FORMAT.findall(translated)) == set(PYTHON_FORMAT.findall(ids[-1])), (key, translated)
                translated % {name: 1 for name in PYTHON_FORMAT.findall(translated)}
            else:  # prompts are str.format templates: the same fields, and formatting works where the msgid's does
                assert sorted(BRACES.findall(translated)) == sorted(BRACES.findall(ids[0])), (key, translated)
                fields = {name: "x" for _, name, _, _ in _fields(ids[0])}
                try:
                    ids[0].format(**{k: 0.5 for k in fields})
                except (ValueError, KeyError, IndexError):
                    continue  # not a format template (JSON braces shown as they are)
                translated.format(**{k: 0.5 for k in fields})


def _fields(text: str):
    try:
        return [part for part in string.Formatter().parse(text) if part[1]]
    except ValueError:
        return []


@pytest.mark.parametrize("language", i18n.LANGUAGES)
def test_what_code_reads_back_from_a_prompt_stays_in_every_language(language):
    """The parser's markers stay verbatim; the continuation's stop and the reply's speaker are the turn's own words."""
    guide = i18n.text(COMMANDS_GUIDE, language)
    for marker in (
        "# Commands:",
        "# End commands",
        "UnverifiedFacts:",
        "Confidence:",
        "Emotions:",
        "[confidence=0.6]",
        '"type": "messages.send"',
    ):
        assert marker in guide, (language, marker)
    assert i18n.text(HUMAN_WRITES, language) in i18n.text(CONTINUATION_HUMAN_TURN, language)
    assert f"{i18n.text(REPLY_HUMAN, language)}: {{note}}" in i18n.text(REPLY_PROMPT, language)
    assert "<data …>" in i18n.text(DATA_RULE, language)


def test_the_catalogues_speak_japanese_and_russian():
    assert i18n.text("Incoming notes", "ru") == "Входящие заметки"
    assert i18n.text("Incoming notes", "ja") == "届いたメモ"
    assert i18n.text("Incoming notes", "en") == "Incoming notes" == i18n.text("Incoming notes", "xx")
    assert i18n.translations("ru", "web").ngettext("%(num)d attempt", "%(num)d attempts", 5) == "%(num)d попыток"
    assert i18n.translations("ru", "web").ngettext("%(num)d attempt", "%(num)d attempts", 3) == "%(num)d попытки"


def test_the_browser_s_language_is_negotiated():
    assert i18n.accepted("ru-RU,ru;q=0.9,en-US;q=0.8,en;q=0.7") == ["ru", "en"]
    assert i18n.accepted("de-DE, ja;q=0.5, ru;q=0") == ["ja"]  # German: no catalogue; q=0: refused
    assert i18n.accepted("en;q=0.2, ja") == ["ja", "en"] and i18n.accepted(None) == [] and i18n.accepted("*;q=x") == []
    assert i18n.negotiate(accept_language="ja,en") == "ja"
    assert i18n.negotiate(setting="ru", accept_language="ja,en") == "ru"  # the setting names one: it wins
    assert i18n.negotiate(setting="auto", accept_language="ja,en") == "ja"
    assert i18n.negotiate(chosen="en", setting="ru", accept_language="ja") == "en"  # the page's choice wins
    assert i18n.negotiate(chosen="klingon", accept_language="fr") == "en"


def test_a_note_s_language_is_read_from_its_script():
    assert i18n.of_text("Привет, как ты?") == "ru" and i18n.of_text("今日は海へ行きました。") == "ja"
    assert i18n.of_text("カタカナ") == "ja" and i18n.of_text("Hello, Lumen!") == "en"
    assert i18n.of_text("Lumen, привет! Как дела?") == "ru"  # most letters decide
    assert i18n.of_text("12345 !!") is None and i18n.of_text("你好") is None  # Chinese: no catalogue


def test_pages_render_in_the_browser_s_language(web):
    ja = web.client.get("/", headers={"Accept-Language": "ja,en;q=0.5"})
    assert ja.status_code == 200 and '<html lang="ja"' in ja.text
    assert ">送信</button>" in ja.text and ">思考</a>" in ja.text and 'aria-label="メッセージ"' in ja.text
    ru = web.client.get("/memory", headers={"Accept-Language": "ru-RU,ru;q=0.9"})
    assert '<html lang="ru"' in ru.text and "<h1>Память</h1>" in ru.text and ">Искать</button>" in ru.text
    assert "Дневник" in ru.text  # a tier's label (memory/tiers.py) through the same catalogue
    en = web.client.get("/memory")
    assert '<html lang="en"' in en.text and "<h1>Memory</h1>" in en.text and "Diary" in en.text
    talk = web.client.get("/", headers={"Accept-Language": "ru"}).text  # app.js reads its lines from the button
    assert 'data-msg-listening="Слушаю… отпустите, чтобы отправить."' in talk
    assert 'data-msg-heard="Услышано (%(language)s, %(seconds)s с)."' in talk
    approvals = web.client.get("/approvals", headers={"Accept-Language": "ru"})
    assert "Ничто не ждёт вашего одобрения." in approvals.text and "Журнал аудита" in approvals.text


def test_the_setting_and_the_switcher_choose_the_language(web, monkeypatch):
    monkeypatch.setenv("ANIMA_LANGUAGE", "ru")  # the `language` setting, as --lang ru gives it
    page = web.client.get("/controls", headers={"Accept-Language": "en"})
    assert '<html lang="ru"' in page.text and "<h1>Управление</h1>" in page.text and "Добавить модель" in page.text
    chosen = web.client.get("/language/ja", params={"next": "/controls"}, follow_redirects=False)
    assert chosen.status_code == 303 and chosen.headers["location"] == "/controls"
    assert f"{i18n.COOKIE}=ja" in chosen.headers["set-cookie"] and "Max-Age=31536000" in chosen.headers["set-cookie"]
    assert "<h1>操作</h1>" in web.client.get("/controls").text  # the cookie now rides along: the choice wins
    assert 'data-testid="lang-ja" aria-current="true"' in web.client.get("/").text
    web.client.cookies.clear()
    assert web.client.get("/language/de", follow_redirects=False).status_code == 404
    elsewhere = web.client.get("/language/en", params={"next": "//evil.example/"}, follow_redirects=False)
    assert elsewhere.headers["location"] == "/"  # only a path of this app


def test_live_fragments_and_flash_texts_follow_the_page(web):
    from web.pages.live import talk_status

    assert talk_status({"kind": "step", "node": "call_llm", "tick": 4}, "ru") == "такт 4 · думает…"
    assert talk_status({"kind": "tick", "tick": 4}, "ja") == "ティック 4 完了"
    saved = web.client.put(
        "/persona/files/USER.md", data={"text": "My human likes tea."}, headers={**web.csrf, "Accept-Language": "ru"}
    )
    assert saved.status_code == 200 and "USER.md сохранён" in saved.text


def _ticked_prompt(agent_factory, language: str | None, text: str) -> str:
    fake = FakeLLM("fake", responses=["I listen."])
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        person = repos.people.add("Анна", role="owner", added_by="test", language=language)
        repos.notes.add(text, source="channel", author_id=person.id)
    state = agent.tick()
    assert state["context_report"]["language"] == (language or i18n.of_text(text))
    return state["prompt"]


def test_the_prompt_is_assembled_in_the_language_of_the_russian_speaking_person(agent_factory):
    prompt = _ticked_prompt(agent_factory, "ru", "Hi! How are you today?")  # her language, not the note's letters
    assert "# Входящие заметки" in prompt and "# Этика" in prompt and "# Как действовать: команды" in prompt
    assert "Текст между <data …> и </data …> пришёл извне" in prompt and "Hi! How are you today?" in prompt
    assert "# Commands:" in prompt and "# Incoming notes" not in prompt and "How to act: commands" not in prompt


def test_a_japanese_note_from_someone_with_no_language_gets_a_japanese_prompt(agent_factory):
    prompt = _ticked_prompt(agent_factory, None, "こんにちは、元気ですか？")
    assert "# 届いたメモ" in prompt and "# 行動のしかた: コマンド" in prompt


def test_an_english_note_keeps_the_english_prompt(agent_factory):
    prompt = _ticked_prompt(agent_factory, None, "Hello there, how are you?")
    assert "# Incoming notes" in prompt and "# How to act: commands" in prompt


def test_the_language_setting_has_its_flag_and_its_source(no_anima_environment, tmp_path):
    settings = load_settings(overrides=Overrides.of(data_dir=str(tmp_path), language="ru"))
    assert settings.language == "ru" and settings.prompt_language == "ru"
    assert ("language", "ru", "flag --lang") in settings.effective()
    default = load_settings(overrides=Overrides.of(data_dir=str(tmp_path)))
    assert default.language == "auto" and default.prompt_language == "en" and default.source("language") == "default"
    assert set(Settings.model_fields["language"].annotation.__args__) == {"auto", *i18n.LANGUAGES}
    with pytest.raises(Exception, match=r"--lang \(language\)"):  # the flag named, as the person typed it
        load_settings(overrides=Overrides.of(data_dir=str(tmp_path), language="de"))


def test_an_error_meant_for_people_comes_in_their_language(web):
    russian = web.client.get("/api/approvals/999", headers={"Accept-Language": "ru"})
    assert russian.status_code == 404 and russian.json() == {
        "error": "одобрения 999 нет",
        "field": "approval_id",
        "status": 404,
    }
    assert web.client.get("/api/approvals/999").json()["error"] == "no approval 999"  # no preference: English
