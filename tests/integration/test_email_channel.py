"""The e-mail channel against a real Dovecot (IMAP, IDLE) and a real SMTP server delivering into it over LMTP
(tests/integration/mail_servers.py): a mail in the inbox arrives as an Incoming with its thread, the reply sent over
SMTP lands in the sender's mailbox threaded to it, a rewound cursor gives the same ids, already_sent finds a sent
Message-ID. Ann's mails are DKIM-signed for example.org and the SMTP server stamps its verdict, as real ones do. One
pair of servers for the module; every wait is bounded."""

from __future__ import annotations

import asyncio
import smtplib
from collections.abc import Iterator
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest

from channels.base import Batch, ChannelDown, Outgoing
from channels.email import EmailChannel, parse_options
from tests.integration import mail_servers

pytestmark = [
    pytest.mark.skipif(mail_servers.missing() is not None, reason=str(mail_servers.missing())),
    pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS"),
]

ANIMA, ANN = "anima@example.org", "ann@example.org"


@pytest.fixture(scope="module")
def servers() -> Iterator[mail_servers.MailServers]:
    with mail_servers.running() as running:
        yield running


def channel_for(servers: mail_servers.MailServers, **extra: str) -> EmailChannel:
    options = {
        "address": ANIMA,
        "display_name": "Anima",
        "imap_host": "127.0.0.1",
        "imap_port": str(servers.imap_port),
        "imap_tls": "none",
        "smtp_port": str(servers.smtp_port),
        "smtp_tls": "none",
        "poll_s": "0.2",
        "timeout_s": "20",
        "trusted_authserv_id": mail_servers.AUTHSERV_ID,
        **extra,
    }
    password = mail_servers.USERS[ANIMA]
    return EmailChannel("email", parse_options("email", options), lambda: password)


def ann_sends(
    servers: mail_servers.MailServers,
    message_id: str,
    subject: str,
    text: str,
    *,
    references: str = "",
    attach: bool = False,
) -> None:
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"], mail["Message-ID"] = f"Ann <{ANN}>", ANIMA, subject, message_id
    if references:
        mail["In-Reply-To"] = references.split()[-1]
        mail["References"] = references
    mail.set_content(text)
    if attach:
        mail.add_attachment(b"# notes\nremember the tea", maintype="text", subtype="markdown", filename="notes.md")
        mail.add_attachment(b"OggS" + b"\0" * 300, maintype="audio", subtype="ogg", filename="voice.ogg")
    mail_servers.submit(servers.smtp_port, mail_servers.signed(mail), sender=ANN, to=ANIMA)


def ann_mailbox(servers: mail_servers.MailServers) -> list[Any]:
    from imapclient import IMAPClient

    client = IMAPClient("127.0.0.1", port=servers.imap_port, ssl=False, timeout=20)
    try:
        client.login(ANN, mail_servers.USERS[ANN])
        client.select_folder("INBOX", readonly=True)
        found = client.fetch(client.search(["ALL"]), [b"BODY.PEEK[]"])
        return [BytesParser(policy=policy.default).parsebytes(v[b"BODY[]"]) for _, v in sorted(found.items())]
    finally:
        client.logout()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout=60))


def test_a_mail_arrives_threaded_and_the_reply_lands_threaded_in_the_senders_mailbox(servers):
    ann_sends(servers, "<root-1@example.org>", "Tea tomorrow?", "Shall we have tea tomorrow?", attach=True)

    async def scenario() -> tuple[Batch, Batch, Batch, str, str | None, str | None, bytes]:
        channel = channel_for(servers)
        await channel.open()
        assert channel._idle_supported  # Dovecot offers IDLE: the wait below is an IDLE
        try:
            first = await channel.fetch(None, wait_s=5)
            # a second mail from Ann, in the same thread, arrives while the channel waits (IDLE)
            waiting = asyncio.create_task(channel.fetch(first.cursor, wait_s=20))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(
                ann_sends,
                servers,
                "<ann-2@example.org>",
                "Re: Tea tomorrow?",
                "Or at five?",
                references="<root-1@example.org>",
            )
            second = await waiting
            answered = first.messages[0]
            reply = Outgoing(
                idempotency_key="outbox-1",
                recipient=answered.sender,
                text="Five suits me.",
                conversation=answered.conversation,
                reply_to=answered.platform_id,
                extra={"subject": answered.extra["subject"]},
            )
            before = await channel.already_sent(reply)
            sent_id = await channel.send(reply)
            await channel.settle(reply, sent_id)  # as the runner does once the outbox has recorded the send
            after = await channel.already_sent(reply)
            rewound = await channel.fetch(None, wait_s=0)
            audio = next(a for a in answered.attachments if a.kind == "audio")
            stripped = type(audio)(kind=audio.kind, name=audio.name, mime=audio.mime, size=audio.size, ref=audio.ref)
            downloaded = await channel.download(stripped, max_bytes=10_000)
            return first, second, rewound, sent_id, before, after, downloaded
        finally:
            await channel.close()

    first, second, rewound, sent_id, before, after, downloaded = run(scenario())

    [mail] = first.messages
    assert (mail.platform_id, mail.sender, mail.sender_name) == ("<root-1@example.org>", ANN, "Ann")
    assert mail.conversation == "<root-1@example.org>" and mail.reply_to is None
    assert mail.text == "Shall we have tea tomorrow?" and mail.extra["subject"] == "Tea tomorrow?"
    assert [(a.kind, a.name, a.size) for a in mail.attachments] == [
        ("text", "notes.md", 24),
        ("audio", "voice.ogg", 304),
    ]
    assert mail.attachments[0].data == b"# notes\nremember the tea"
    assert downloaded == b"OggS" + b"\0" * 300

    [followup] = second.messages
    assert followup.platform_id == "<ann-2@example.org>"
    assert followup.conversation == "<root-1@example.org>" and followup.reply_to == "<root-1@example.org>"
    assert second.cursor != first.cursor

    assert [m.platform_id for m in rewound.messages] == ["<root-1@example.org>", "<ann-2@example.org>"]

    assert before is None and after == sent_id
    [landed] = ann_mailbox(servers)
    assert landed["Message-ID"] == sent_id
    assert landed["In-Reply-To"] == "<root-1@example.org>"
    assert landed["References"] == "<root-1@example.org>"
    assert landed["Subject"] == "Re: Tea tomorrow?"
    assert landed["From"].addresses[0].addr_spec == ANIMA
    assert landed.get_content().strip() == "Five suits me."


def test_a_resend_after_a_crash_is_recognised_where_the_sent_folder_can_tell(servers):
    """The process "dies" right after the SMTP server's 250, before the outbox records it. A server that files each
    submitted mail in Sent before its 250 (`append_sent: false`) lets the restart recognise it; where the channel
    appends the copy itself, after recording, the copy is not there yet: `already_sent` cannot tell, and the channel
    says so (`can_tell_sent`), so the runner marks the resend a possible duplicate (docs/channels.md)."""

    async def scenario(**options: str) -> tuple[str, str | None, str | None, str, bool]:
        channel = channel_for(servers, **options)
        key = f"outbox-crash-{len(options)}"
        message = Outgoing(idempotency_key=key, recipient=ANN, text="Hello again")
        sent_id = await channel.send(message)  # the process "dies" here
        after_restart = channel_for(servers, **options)
        found = await after_restart.already_sent(message)
        other = await after_restart.already_sent(Outgoing(idempotency_key="outbox-never", recipient=ANN, text="x"))
        return sent_id, found, other, after_restart.message_id_for(message), after_restart.can_tell_sent

    with servers.receiving_as(file_sent=True):
        sent_id, found, other, derived, can_tell = run(scenario(append_sent="false"))
    assert found == sent_id == derived and other is None and can_tell
    sent_id, found, _, _, can_tell = run(scenario())
    assert found is None and not can_tell
    assert sent_id in [m["Message-ID"] for m in ann_mailbox(servers)]


def test_an_unreachable_server_is_channel_down(servers):
    async def scenario() -> None:
        channel = channel_for(servers, imap_port=str(mail_servers.free_port()))
        await channel.open()

    with pytest.raises(ChannelDown):
        run(scenario())


def test_a_wrong_password_is_channel_down_not_a_crash(servers, tmp_path: Path):
    options = parse_options(
        "email",
        {
            "address": ANIMA,
            "imap_host": "127.0.0.1",
            "imap_tls": "none",
            "imap_port": str(servers.imap_port),
            "smtp_tls": "none",
            "require_authentication": "false",
        },
    )
    channel = EmailChannel("email", options, lambda: "wrong")
    with pytest.raises(ChannelDown):
        run(channel.fetch(None, wait_s=0))


def test_an_answer_with_only_the_conversation_finds_the_threads_subject_and_references(servers):
    """As the outbox hands it over: no subject, no References — the thread's mail in the inbox has them."""
    ann_sends(servers, "<root-3@example.org>", "Books", "Which book next?")
    ann_sends(servers, "<ann-4@example.org>", "Re: Books", "Or a film?", references="<root-3@example.org>")

    async def scenario() -> str:
        channel = channel_for(servers)
        return await channel.send(
            Outgoing(
                idempotency_key="outbox-books",
                recipient=ANN,
                text="A film.",
                conversation="<root-3@example.org>",
                reply_to="<ann-4@example.org>",
            )
        )

    sent_id = run(scenario())
    [landed] = [m for m in ann_mailbox(servers) if m["Message-ID"] == sent_id]
    assert landed["Subject"] == "Re: Books"
    assert landed["In-Reply-To"] == "<ann-4@example.org>"
    assert landed["References"] == "<root-3@example.org> <ann-4@example.org>"


def test_without_idle_a_poll_finds_the_mail_that_arrives_while_waiting(servers):
    async def scenario() -> tuple[bool, Batch]:
        channel = channel_for(servers, idle="false", poll_s="0.2")
        await channel.open()
        try:
            start = await channel.fetch(None, wait_s=0)
            waiting = asyncio.create_task(channel.fetch(start.cursor, wait_s=20))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(ann_sends, servers, "<polled@example.org>", "Polled", "Found by polling")
            return channel._idle_supported, await waiting
        finally:
            await channel.close()

    idled, batch = run(scenario())
    assert idled is False
    assert [m.platform_id for m in batch.messages] == ["<polled@example.org>"]


def test_over_tls_and_starttls_with_the_servers_certificate(servers):
    """The default modes: IMAP over implicit TLS (and STARTTLS), SMTP with STARTTLS, verified against a CA file."""
    ann_sends(servers, "<tls-1@example.org>", "Secure?", "Over TLS")
    tls = {
        "imap_tls": "tls",
        "imap_port": str(servers.imaps_port),
        "smtp_tls": "starttls",
        "ca_file": str(servers.certificate),
    }
    starttls = {
        "imap_tls": "starttls",
        "imap_port": str(servers.imap_port),
        "smtp_tls": "starttls",
        "ca_file": str(servers.certificate),
    }

    async def scenario() -> tuple[list[str], list[str], str]:
        over_tls, over_starttls = channel_for(servers, **tls), channel_for(servers, **starttls)
        found: list[list[str]] = []
        for channel in (over_tls, over_starttls):
            await channel.open()
            try:
                batch = await channel.fetch(None, wait_s=0)
                found.append([m.platform_id for m in batch.messages])
            finally:
                await channel.close()
        sent = await over_tls.send(
            Outgoing(
                idempotency_key="outbox-tls", recipient=ANN, text="Yes, over TLS.", conversation="<tls-1@example.org>"
            )
        )
        return found[0], found[1], sent

    over_tls, over_starttls, sent_id = run(scenario())
    assert "<tls-1@example.org>" in over_tls and over_tls == over_starttls
    [landed] = [m for m in ann_mailbox(servers) if m["Message-ID"] == sent_id]
    assert landed["Subject"] == "Re: Secure?" and landed["In-Reply-To"] == "<tls-1@example.org>"


def test_a_certificate_the_client_does_not_trust_is_refused_as_channel_down(servers):
    channel = channel_for(servers, imap_tls="tls", imap_port=str(servers.imaps_port))  # the system CAs only
    with pytest.raises(ChannelDown, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        run(channel.open())


def test_an_auto_reply_and_the_personas_own_mail_are_passed_over(servers):
    async def scenario() -> Batch:
        channel = channel_for(servers)
        await channel.open()
        try:
            start = await channel.fetch(None, wait_s=0)
            vacation = EmailMessage()
            vacation["From"], vacation["To"], vacation["Subject"] = ANN, ANIMA, "Out of office"
            vacation["Message-ID"], vacation["Auto-Submitted"] = "<vacation@example.org>", "auto-replied"
            vacation.set_content("I am away.")
            with smtplib.SMTP("127.0.0.1", servers.smtp_port, timeout=20) as smtp:
                smtp.login(ANN, mail_servers.USERS[ANN])
                smtp.send_message(vacation)
            await channel.send(Outgoing(idempotency_key="to-myself", recipient=ANIMA, text="a note to self"))
            await asyncio.to_thread(ann_sends, servers, "<person@example.org>", "Back", "I am back.")
            return await channel.fetch(start.cursor, wait_s=5)
        finally:
            await channel.close()

    batch = run(scenario())
    assert [m.platform_id for m in batch.messages] == ["<person@example.org>"]
