"""The e-mail channel's pure parts: MIME parsing, thread headers, the outgoing mail and its Message-ID, options."""

from __future__ import annotations

from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from types import SimpleNamespace

import pytest

from channels.base import Outgoing
from channels.email import (
    EmailChannel,
    attachment_kind,
    build_mail,
    html_to_text,
    message_ids,
    outgoing_message_id,
    parse_mail,
    parse_options,
    reply_subject,
    strip_quoted_tail,
    thread_root,
)

OPTIONS = parse_options(
    "email",
    {
        "address": "anima@example.org",
        "display_name": "Anima",
        "imap_host": "mail.example.org",
        "trusted_authserv_id": "mail.example.org",
    },
)


def mail_bytes(**headers: str) -> EmailMessage:
    mail = EmailMessage()
    for name, value in headers.items():
        mail[name.replace("_", "-")] = value
    return mail


def test_a_plain_mail_with_attachments_parses_into_text_thread_and_sized_attachments():
    mail = mail_bytes(
        From="Ann Lee <Ann@Example.org>",
        To="anima@example.org",
        Subject="Tea",
        Message_ID="<m2@example.org>",
        In_Reply_To="<m1@example.org>",
        References="<root@example.org> <m1@example.org>",
        Date="Tue, 24 Nov 2026 10:00:00 +0100",
    )
    mail.set_content("Shall we?\n")
    mail.add_attachment(b"# notes", maintype="text", subtype="markdown", filename="notes.md")
    mail.add_attachment(b"RIFF" + b"\0" * 96, maintype="audio", subtype="wav", filename="hello.wav")
    mail.add_attachment(b"\x89PNG" + b"\0" * 2000, maintype="image", subtype="png", filename="cat.png")

    parsed = parse_mail(bytes(mail), ref_prefix="7:42", fallback_id="imap:7:42", max_attachment_bytes=1000)

    assert (parsed.message_id, parsed.sender, parsed.sender_name) == ("<m2@example.org>", "ann@example.org", "Ann Lee")
    assert parsed.text == "Shall we?" and parsed.subject == "Tea"
    assert parsed.in_reply_to == "<m1@example.org>"
    assert parsed.references == "<root@example.org> <m1@example.org>"
    assert thread_root(parsed.message_id, parsed.in_reply_to, parsed.references) == "<root@example.org>"
    assert parsed.sent_at.isoformat() == "2026-11-24T10:00:00+01:00"
    assert [(a.kind, a.name, a.mime, a.size) for a in parsed.attachments] == [
        ("text", "notes.md", "text/markdown", 7),
        ("audio", "hello.wav", "audio/wav", 100),
        ("image", "cat.png", "image/png", 2004),
    ]
    assert parsed.attachments[0].data == b"# notes" and parsed.attachments[2].data is None  # beyond the cap
    assert all(a.ref.startswith("7:42:") for a in parsed.attachments)


def test_an_html_only_mail_becomes_text_and_a_mail_without_ids_gets_the_fallback():
    mail = mail_bytes(From="bo@example.org", Subject="Hi")
    mail.set_content(
        "<html><style>p{}</style><body><p>Hello&nbsp;<b>there</b></p><p>Bye</p></body></html>", subtype="html"
    )
    parsed = parse_mail(bytes(mail), ref_prefix="1:5", fallback_id="imap:1:5", max_attachment_bytes=10)
    assert parsed.text == "Hello\xa0there\nBye"
    assert parsed.message_id == "imap:1:5"
    assert thread_root(parsed.message_id, parsed.in_reply_to, parsed.references) == "imap:1:5"
    assert parsed.sent_at.tzinfo is not None


def test_thread_headers():
    assert message_ids("<a@x> junk <b@y>") == ["<a@x>", "<b@y>"]
    assert thread_root("<c@x>", "<b@x>", "") == "<b@x>"
    assert thread_root("<c@x>", None, None) == "<c@x>"
    assert reply_subject("Tea") == "Re: Tea" and reply_subject("RE: Tea") == "RE: Tea"
    assert html_to_text("a<br>b") == "a\nb"
    assert attachment_kind("application/pdf", "x.pdf") == "text"
    assert attachment_kind("application/zip", "x.zip") == "file"


def test_a_reply_carries_in_reply_to_references_and_re_subject_and_a_key_derived_message_id():
    message = Outgoing(
        idempotency_key="k-1",
        recipient="ann@example.org",
        text="Five suits me.",
        conversation="<root@example.org>",
        reply_to="<m2@example.org>",
        extra={"subject": "Tea", "references": "<root@example.org> <m1@example.org>"},
    )
    message_id = outgoing_message_id("email", "k-1", OPTIONS.domain)
    assert (
        message_id
        == outgoing_message_id("email", "k-1", "example.org")
        != outgoing_message_id("email", "k-2", "example.org")
    )
    assert message_id.startswith("<anima.") and message_id.endswith("@example.org>")

    parsed = BytesParser(policy=policy.default).parsebytes(bytes(build_mail(OPTIONS, message, message_id)))
    assert parsed["Message-ID"] == message_id
    assert parsed["In-Reply-To"] == "<m2@example.org>"
    assert parsed["References"] == "<root@example.org> <m1@example.org> <m2@example.org>"
    assert parsed["Subject"] == "Re: Tea"
    assert str(parsed["From"]) == "Anima <anima@example.org>"
    assert parsed.get_content().strip() == "Five suits me."


def test_a_new_thread_has_no_thread_headers_and_a_spoken_answer_is_attached():
    message = Outgoing(idempotency_key="k-2", recipient="ann@example.org", text="Good morning", audio=b"OggS1234")
    parsed = BytesParser(policy=policy.default).parsebytes(bytes(build_mail(OPTIONS, message, "<x@example.org>")))
    assert parsed["In-Reply-To"] is None and parsed["References"] is None
    assert parsed["Subject"] == "A message"
    [audio] = list(parsed.iter_attachments())
    assert (audio.get_content_type(), audio.get_filename(), audio.get_content()) == (
        "audio/ogg",
        "answer.ogg",
        b"OggS1234",
    )


def test_options_ports_by_tls_mode_clear_text_only_on_loopback_and_from_entry_needs_the_password():
    assert (OPTIONS.imap_port_or_default, OPTIONS.smtp_port_or_default, OPTIONS.smtp_server) == (
        993,
        587,
        "mail.example.org",
    )
    with pytest.raises(ValueError, match="imap_tls none"):
        parse_options("mail", {"address": "a@example.org", "imap_host": "mail.example.org", "imap_tls": "none"})
    with pytest.raises(ValueError, match="mail: option imap_host"):
        parse_options("mail", {"address": "a@example.org"})
    entry = SimpleNamespace(
        name="mail",
        options={"address": "a@example.org", "imap_host": "127.0.0.1", "require_authentication": "false"},
        max_attachment_bytes=123,
    )
    with pytest.raises(ValueError, match="`password` is missing"):
        EmailChannel.from_entry(entry, {})
    channel = EmailChannel.from_entry(entry, {"password": "pw"})
    assert (channel.name, channel.kind, channel.max_attachment_bytes) == ("mail", "email", 123)
    assert "pw" not in repr(vars(channel))  # kept inside a closure, not as a visible attribute


def test_the_quoted_tail_of_a_reply_is_left_out_but_a_quote_in_between_and_a_bare_quote_stay():
    wrapped = "Five is fine.\n\nOn Tue, 24 Nov 2026 at 10:00, Anima <\nanima@example.org> wrote:\n> Tea at four?\n> \n"
    assert strip_quoted_tail(wrapped) == "Five is fine."
    assert strip_quoted_tail("Да.\n\n24.11.2026 Анима написал(а):\n> Чай?") == "Да."
    inline = "> Tea at four?\nNo, at five.\n"
    assert strip_quoted_tail(inline) == inline
    assert strip_quoted_tail("> only a quote") == "> only a quote"


def test_auto_replies_and_bounces_are_automatic_and_a_persons_mail_is_not():
    def parsed(**headers: str) -> bool:
        mail = mail_bytes(**headers)
        mail.set_content("x")
        return parse_mail(bytes(mail), ref_prefix="1:1", fallback_id="f", max_attachment_bytes=0).automatic

    assert parsed(From="ann@example.org", Auto_Submitted="auto-replied")
    assert parsed(From="ann@example.org", Precedence="bulk")
    assert parsed(From="MAILER-DAEMON@example.org")
    assert not parsed(From="ann@example.org", Auto_Submitted="no")
    assert not parsed(From="ann@example.org")
