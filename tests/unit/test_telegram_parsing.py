"""The Telegram channel's pure parts: a Bot API update → Incoming (text, reply, voice, document, photo), text
splitting, options."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from telegram import Update

from channels.telegram import TelegramChannel, incoming_of, parse_options, split_text


def update(message: dict[str, Any]) -> Update:
    base = {
        "message_id": 5,
        "date": 1_795_600_000,
        "chat": {"id": -100, "type": "group"},
        "from": {"id": 77, "is_bot": False, "first_name": "Ann", "last_name": "Lee", "username": "ann"},
    }
    parsed = Update.de_json({"update_id": 9, "message": {**base, **message}}, None)
    assert parsed is not None
    return parsed


def test_a_text_reply_becomes_an_incoming_with_chat_and_reply_ids():
    u = update(
        {
            "text": "hi there",
            "reply_to_message": {
                "message_id": 3,
                "date": 1_795_599_000,
                "chat": {"id": -100, "type": "group"},
                "text": "?",
            },
        }
    )
    assert u.message is not None
    incoming = incoming_of("tg", u.message)
    assert incoming is not None
    assert (incoming.channel, incoming.platform_id, incoming.sender, incoming.sender_name) == (
        "tg",
        "-100:5",
        "77",
        "Ann Lee",
    )
    assert (incoming.conversation, incoming.text, incoming.reply_to) == ("-100", "hi there", "-100:3")
    assert incoming.extra == {"chat_type": "group", "username": "ann"}
    assert incoming.sent_at.tzinfo is not None and incoming.sent_at.timestamp() == 1_795_600_000


def test_voice_document_and_photo_become_attachments_by_reference():
    u = update(
        {
            "caption": "look",
            "voice": {
                "file_id": "V1",
                "file_unique_id": "v",
                "duration": 2,
                "mime_type": "audio/ogg",
                "file_size": 900,
            },
            "document": {
                "file_id": "D1",
                "file_unique_id": "d",
                "file_name": "a.pdf",
                "mime_type": "application/pdf",
                "file_size": 4000,
            },
            "photo": [
                {"file_id": "P-small", "file_unique_id": "p1", "width": 90, "height": 90, "file_size": 10},
                {"file_id": "P-big", "file_unique_id": "p2", "width": 900, "height": 900, "file_size": 100},
            ],
        }
    )
    assert u.message is not None
    incoming = incoming_of("tg", u.message)
    assert incoming is not None and incoming.text == "look"
    assert [(a.kind, a.mime, a.size, a.ref, a.data) for a in incoming.attachments] == [
        ("audio", "audio/ogg", 900, "V1", None),
        ("text", "application/pdf", 4000, "D1", None),
        ("image", "image/jpeg", 100, "P-big", None),
    ]


def test_a_bots_message_is_not_an_incoming():
    u = update({"text": "beep", "from": {"id": 1, "is_bot": True, "first_name": "Other bot"}})
    assert u.message is not None and incoming_of("tg", u.message) is None


def test_long_text_is_cut_into_pieces_at_spaces():
    text = ("word " * 2000).strip()
    pieces = split_text(text)
    assert len(pieces) == 3 and all(len(p) <= 4096 for p in pieces)
    assert " ".join(pieces) == text
    assert split_text("") == [""] and split_text("short") == ["short"]


def test_options_and_from_entry():
    assert parse_options("tg", {}).api_url == "https://api.telegram.org"
    assert parse_options("tg", {"api_url": "http://127.0.0.1:8081/"}).api_url == "http://127.0.0.1:8081"
    with pytest.raises(ValueError, match="http only on loopback"):
        parse_options("tg", {"api_url": "http://bots.example.org"})
    entry = SimpleNamespace(name="tg", options={}, max_attachment_bytes=500)
    with pytest.raises(ValueError, match="`token` is missing"):
        TelegramChannel.from_entry(entry, {})
    channel = TelegramChannel.from_entry(entry, {"token": "1:abc"})
    assert (channel.name, channel.kind, channel.max_attachment_bytes) == ("tg", "telegram", 500)


def test_the_token_in_logged_bot_api_urls_is_masked(caplog):
    import logging

    from channels.telegram import redact_tokens_in_logs

    redact_tokens_in_logs()
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("httpx").info(
            'HTTP Request: %s %s "%s %d %s"',
            "POST",
            "https://api.telegram.org/bot123:SECRET/getUpdates",
            "HTTP/1.1",
            200,
            "OK",
        )
        logging.getLogger("telegram.Bot").debug("Set Bot API File URL: https://x/file/bot123:SECRET/")
    text = caplog.text
    assert "SECRET" not in text
    assert "/bot***/getUpdates" in text and "200" in text and "/file/bot***/" in text
