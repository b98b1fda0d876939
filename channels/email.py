"""E-mail as a channel: IMAP in (IDLE where the server has it, else polling), SMTP out, threads by Message-ID.

Libraries: IMAPClient (a complete, parsed IMAP client — UIDVALIDITY, UID SEARCH, IDLE with a timeout, APPEND — run in
a worker thread: it is synchronous) and aiosmtplib (asyncio SMTP with implicit TLS or STARTTLS).

- cursor: `UIDVALIDITY:UID` of the last message handed out; a changed UIDVALIDITY starts over (the newest
  `batch` messages), so does no cursor.
- in: `Incoming.platform_id` is the mail's Message-ID (`<…>`; `imap:<validity>:<uid>` when it has none), so a fetch
  after a rewound cursor gives the same ids; `conversation` is the thread's root (the first of References, else
  In-Reply-To, else the mail's own Message-ID); `reply_to` its In-Reply-To; the text without the quoted mail at its
  end (the thread is already in memory). Auto-replies, bounces (Auto-Submitted, Precedence bulk/junk, mailer-daemon)
  and the persona's own mails are passed over: answering them could loop. Attachments: text/* and PDF are "text",
  audio/* "audio", image/* "image", anything else "file"; each with its size and, within the size cap, its bytes.
- who sent it: the From address is believed only when the receiving server's Authentication-Results (its
  `trusted_authserv_id`; any other is the sender's own word) says DKIM or SPF passed for a domain aligned with it
  (channels/email_auth.py); a mail that fails is handed out `unverified` — a stranger's, whatever its From says.
  `require_authentication: false` believes the From alone (a private server the operator trusts).
- out: the Message-ID is derived from the outbox's idempotency key, replies carry In-Reply-To and References and
  the subject "Re: …"; `send` returns at the SMTP server's 250, and once the outbox has recorded it `settle` appends
  a copy to the sent folder, where `already_sent` looks for that Message-ID before a resend (`append_sent: false`
  where the server files sent mail there itself, before its 250: then a resend is never a second mail).

Options (`options:` of a `kind: email` entry, plain strings) — see `EmailOptions`; the secret `password` comes
from the entry's secrets (environment or secrets file), never from the options.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import re
import ssl
import threading
import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, parseaddr, parsedate_to_datetime
from html.parser import HTMLParser
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from channels.base import Attachment, AttachmentKind, Batch, Channel, ChannelDown, ChannelRefused, Incoming, Outgoing
from channels.email_auth import Alignment, SenderCheck, check_sender, header_fields
from channels.options import ChannelEntryLike
from channels.options import parse_options as parse_entry_options
from memory.clock import utcnow

TlsMode = Literal["tls", "starttls", "none"]
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
MESSAGE_ID = re.compile(r"<[^<>\s]+>")
T = TypeVar("T")


class EmailOptions(BaseModel):
    """A `kind: email` entry's options. Ports default by TLS mode (IMAP 993/143, SMTP 465/587); `none` (no TLS,
    the password in clear) is refused beyond loopback."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    address: str = Field(description="the persona's own address (From)")
    display_name: str = ""
    username: str = Field("", description="the login; the address when empty")
    imap_host: str
    imap_port: int | None = Field(None, ge=1, le=65535)
    imap_tls: TlsMode = "tls"
    smtp_host: str = Field("", description="the IMAP host when empty")
    smtp_port: int | None = Field(None, ge=1, le=65535)
    smtp_tls: TlsMode = "starttls"
    folder: str = "INBOX"
    sent_folder: str = Field("Sent", description="copies of sent mail, where already_sent looks; '' = none")
    append_sent: bool = Field(True, description="put a copy there (false where the server files sent mail itself)")
    idle: bool = Field(True, description="use IDLE where the server offers it (else poll)")
    poll_s: float = Field(30.0, gt=0, le=3600, description="between polls without IDLE")
    batch: int = Field(50, ge=1, le=1000, description="messages per fetch at most")
    max_message_bytes: int = Field(10_000_000, ge=1000, description="larger mails arrive with their headers only")
    timeout_s: float = Field(30.0, gt=0, le=600)
    ca_file: str = Field("", description="a CA bundle for a server with a private certificate")
    subject: str = Field("A message", description="the subject of a message that starts a thread")
    trusted_authserv_id: str = Field(
        "",
        description="the authserv-id the receiving server writes in its "
        "Authentication-Results headers; the only one believed, and only above that "
        "server's own Received",
    )
    receiving_hosts: str = Field(
        "",
        description="the host name(s), comma-separated, the receiving server writes "
        "after `by` in its Received header; the trusted_authserv_id when empty",
    )
    require_authentication: bool = Field(
        True,
        description="a From is believed only when that server's DKIM or "
        "SPF result passed for an aligned domain; false: for a private server you "
        "trust, the From alone",
    )
    alignment: Alignment = Field("relaxed", description="DMARC's: relaxed (same organisational domain) or strict")
    verify_dkim: bool = Field(
        False,
        description="verify a mail's DKIM signature here too (dkimpy, its key from the "
        "DNS) when the server's headers do not vouch for it",
    )

    @model_validator(mode="after")
    def _clear_text_only_on_loopback(self) -> EmailOptions:
        for what, host, mode in (("imap", self.imap_host, self.imap_tls), ("smtp", self.smtp_server, self.smtp_tls)):
            if mode == "none" and host not in LOOPBACK:
                raise ValueError(f"{what}_tls none sends the password in clear: only on loopback, not to {host}")
        if "@" not in parseaddr(self.address)[1]:
            raise ValueError(f"address {self.address!r} is not an e-mail address")
        if self.require_authentication and not (self.trusted_authserv_id.strip() or self.verify_dkim):
            raise ValueError(
                "trusted_authserv_id is needed while require_authentication is on (the default): the "
                "name your receiving server writes in Authentication-Results (e.g. mx.example.org); "
                "or verify_dkim: true, or require_authentication: false for a private server you trust"
            )
        return self

    @property
    def smtp_server(self) -> str:
        return self.smtp_host or self.imap_host

    @property
    def login(self) -> str:
        return self.username or self.address

    @property
    def imap_port_or_default(self) -> int:
        return self.imap_port or (993 if self.imap_tls == "tls" else 143)

    @property
    def smtp_port_or_default(self) -> int:
        return self.smtp_port or {"tls": 465, "starttls": 587, "none": 25}[self.smtp_tls]

    @property
    def receiving_host_names(self) -> tuple[str, ...]:
        names = tuple(h.strip() for h in self.receiving_hosts.split(",") if h.strip())
        return names or (self.trusted_authserv_id.strip(),)

    @property
    def domain(self) -> str:
        return parseaddr(self.address)[1].rpartition("@")[2].lower()


def parse_options(name: str, options: Mapping[str, str]) -> EmailOptions:
    return parse_entry_options(EmailOptions, name, options)


# --- parsing (pure: unit-tested) ---------------------------------------------------------------------------------


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in ("br", "p", "div", "li", "tr"):
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(markup: str) -> str:
    parser = _HtmlText()
    parser.feed(markup)
    return re.sub(r"\n{3,}", "\n\n", html.unescape("".join(parser.parts))).strip()


WROTE = re.compile(r"(wrote|написал|писал|schrieb|a écrit|escribió)(\(а\))?:\s*$", re.IGNORECASE)


def strip_quoted_tail(text: str) -> str:
    """The text without the quoted mail at its end (`> …` lines and the "On …, Ann wrote:" line before them, which
    mail programs often wrap onto two lines); text with no such tail, or nothing but a quote, is kept whole."""
    lines = text.splitlines()
    end = len(lines)
    while end and (lines[end - 1].startswith(">") or not lines[end - 1].strip()):
        end -= 1
    if end == len(lines) or not any(line.startswith(">") for line in lines[end:]):
        return text
    if end and WROTE.search(lines[end - 1]):
        end -= 1
        if end and not lines[end].lstrip().lower().startswith("on ") and lines[end - 1].lstrip()[:3].lower() == "on ":
            end -= 1
    kept = "\n".join(lines[:end]).rstrip()
    return kept or text


def printable(value: str) -> str:
    """`value` without control or format characters (a sender's words shown on a page or in a log line)."""
    return "".join(c if unicodedata.category(c)[0] != "C" else " " for c in value).strip()


def message_ids(value: str | None) -> list[str]:
    """The `<…>` ids in a References / In-Reply-To header, in order."""
    return MESSAGE_ID.findall(value or "")


def thread_root(message_id: str, in_reply_to: str | None, references: str | None) -> str:
    refs = message_ids(references)
    if refs:
        return refs[0]
    parents = message_ids(in_reply_to)
    return parents[0] if parents else message_id


def attachment_kind(mime: str, name: str) -> AttachmentKind:
    main = mime.split("/", 1)[0]
    if main == "text" or mime == "application/pdf" or name.lower().endswith((".md", ".txt", ".pdf", ".csv")):
        return "text"
    if main == "audio":
        return "audio"
    if main == "image":
        return "image"
    return "file"


class UnreadableMail(ValueError):
    """A mail this channel cannot read (no single readable From, a header or a part Python's parser chokes on): the
    channel hands it out `quarantined` — set aside, shown to the owner, nothing of it kept — and moves past it."""


@dataclass(frozen=True)
class ParsedMail:
    message_id: str
    sender: str
    sender_name: str
    subject: str
    text: str
    sent_at: datetime
    in_reply_to: str | None
    references: str
    attachments: tuple[Attachment, ...]
    automatic: bool = False  # an auto-reply, a bounce or a list's automatic mail (RFC 3834 Auto-Submitted, …)
    sender_check: SenderCheck | None = None  # the receiving server's verdict on From (None: not asked)


def raw_headers(mail: EmailMessage, name: str) -> list[str]:
    """Every value of header `name` as written (unfolded, not decoded): reading it cannot fail."""
    wanted = name.lower()
    return [
        re.sub(r"\r?\n(?=[ \t])", "", str(value)).strip()
        for key, value in mail.raw_items()
        if key.strip().lower() == wanted
    ]


def header_text(mail: EmailMessage, name: str, default: str = "") -> str:
    """Header `name` decoded (RFC 2047 words), or as written where the decoder fails on it."""
    try:
        value = mail.get(name)
        return default if value is None else str(value)
    except Exception:  # noqa: BLE001 - the email package raises several kinds on a crafted header
        written = raw_headers(mail, name)
        return written[0] if written else default


def from_mailbox(mail: EmailMessage) -> tuple[str, str]:
    """(display name, address) of the mail's From — exactly one From field holding exactly one address, read by the
    `email` package's RFC 5322 parser without an invalid-syntax defect; UnreadableMail otherwise (a mail whose
    sender cannot be told is no one's to hold or to answer)."""
    from email.errors import InvalidHeaderDefect
    from email.headerregistry import HeaderRegistry

    written = raw_headers(mail, "From")
    if len(written) != 1:
        raise UnreadableMail(f"{len(written)} From fields: one is needed")
    try:
        header = HeaderRegistry()("From", written[0])
        addresses = list(header.addresses)  # type: ignore[attr-defined]
        defects = [d for d in header.defects if isinstance(d, InvalidHeaderDefect)]
    except Exception as exc:  # noqa: BLE001 - the parser raises IndexError, HeaderParseError, … on crafted input
        raise UnreadableMail(f"the From field cannot be read ({type(exc).__name__})") from exc
    if defects or len(addresses) != 1 or "@" not in addresses[0].addr_spec:
        raise UnreadableMail(
            f"the From field is not one address ({len(addresses)} read" + (f", {defects[0]}" if defects else "") + ")"
        )
    return str(addresses[0].display_name or ""), str(addresses[0].addr_spec).lower()


def parse_mail(
    raw: bytes,
    *,
    ref_prefix: str,
    fallback_id: str,
    max_attachment_bytes: int,
    received: datetime | None = None,
    authserv_id: str | None = None,
    alignment: Alignment = "relaxed",
    verify_dkim: bool = False,
    receiving_hosts: tuple[str, ...] = (),
    dnsfunc: Callable[..., Any] | None = None,
) -> ParsedMail:
    """A mail's sender, text (plain, else HTML as text), thread headers and attachments (`ref` = ref_prefix:N, N the
    part's index in `walk()` order); with `authserv_id`, whether its From is its sender's (channels/email_auth.py).
    UnreadableMail when its sender cannot be told; any other error means the same to the caller."""
    mail = BytesParser(policy=policy.default).parsebytes(raw)
    message_id = (message_ids(" ".join(raw_headers(mail, "Message-ID"))) or [fallback_id])[0]
    name, address = from_mailbox(mail)
    try:
        dates = raw_headers(mail, "Date")
        sent_at: datetime | None = parsedate_to_datetime(dates[0]) if dates else None
    except (TypeError, ValueError, IndexError):
        sent_at = None
    sent_at = sent_at or received or utcnow()
    if sent_at.tzinfo is None:
        sent_at = sent_at.replace(tzinfo=UTC)
    plain: list[str] = []
    markup: list[str] = []
    attachments: list[Attachment] = []
    for index, part in enumerate(mail.walk()):
        if part.is_multipart():
            continue
        mime = part.get_content_type()
        filename = part.get_filename()
        disposition = part.get_content_disposition()
        if disposition != "attachment" and not filename and mime in ("text/plain", "text/html"):
            try:
                content = part.get_content()
            except (LookupError, ValueError):
                content = part.get_payload(decode=True).decode("utf-8", "replace")  # type: ignore[union-attr]
            (plain if mime == "text/plain" else markup).append(str(content))
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        attachments.append(
            Attachment(
                kind=attachment_kind(mime, filename or ""),
                name=filename or f"part-{index}",
                mime=mime,
                size=len(data),
                ref=f"{ref_prefix}:{index}",
                data=data if len(data) <= max_attachment_bytes else None,
            )
        )
    text = "\n".join(p.strip() for p in plain) if plain else "\n".join(html_to_text(m) for m in markup)
    parents = message_ids(" ".join(raw_headers(mail, "In-Reply-To")))
    in_reply_to = parents[0] if parents else None
    return ParsedMail(
        message_id=message_id,
        sender=address,
        sender_name=name or address,
        subject=header_text(mail, "Subject"),
        text=text.strip(),
        sent_at=sent_at,
        in_reply_to=in_reply_to,
        references=" ".join(message_ids(" ".join(raw_headers(mail, "References")))),
        attachments=tuple(attachments),
        automatic=is_automatic(mail, address),
        sender_check=None
        if authserv_id is None
        else check_sender(
            raw,
            address,
            authserv_id,
            alignment,
            receiving_hosts=receiving_hosts,
            verify_dkim=verify_dkim,
            dnsfunc=dnsfunc,
        ),
    )


def is_automatic(mail: EmailMessage, address: str) -> bool:
    """Sent by a program, not a person: answering it could loop with an autoresponder (RFC 3834)."""
    submitted = " ".join(raw_headers(mail, "Auto-Submitted")).strip().lower() or "no"
    precedence = " ".join(raw_headers(mail, "Precedence")).strip().lower()
    local = address.partition("@")[0].lower()
    return (
        submitted != "no"
        or precedence in ("bulk", "junk", "auto_reply")
        or local in ("mailer-daemon", "postmaster")
        or bool(raw_headers(mail, "X-Autoreply"))
        or bool(raw_headers(mail, "X-Autorespond"))
    )


def part_bytes(raw: bytes, index: int) -> bytes:
    mail = BytesParser(policy=policy.default).parsebytes(raw)
    for n, part in enumerate(mail.walk()):
        if n == index and not part.is_multipart():
            payload = part.get_payload(decode=True)
            return payload if isinstance(payload, bytes) else b""
    raise ChannelRefused(f"no MIME part {index}")


def outgoing_message_id(channel: str, idempotency_key: str, domain: str) -> str:
    """The same key always gives the same Message-ID: a resend after a crash is the same mail."""
    digest = hashlib.sha256(f"{channel}\0{idempotency_key}".encode()).hexdigest()[:32]
    return f"<anima.{digest}@{domain}>"


def reply_subject(subject: str) -> str:
    subject = subject.strip()
    return subject if re.match(r"(?i)re\s*:", subject) else f"Re: {subject}"


def audio_mime(audio: bytes) -> tuple[str, str]:
    if audio[:4] == b"OggS":
        return "audio/ogg", "answer.ogg"
    if audio[:4] == b"RIFF":
        return "audio/wav", "answer.wav"
    return "application/octet-stream", "answer.bin"


def build_mail(
    options: EmailOptions, message: Outgoing, message_id: str, *, now: datetime | None = None
) -> EmailMessage:
    """The mail for `message`: a reply (In-Reply-To = reply_to, References = the thread's ids, "Re: subject") when it
    answers something, else a new thread with the configured subject."""
    mail = EmailMessage()
    mail["From"] = Address(display_name=options.display_name, addr_spec=parseaddr(options.address)[1])
    mail["To"] = message.recipient
    mail["Message-ID"] = message_id
    mail["Date"] = format_datetime(now or utcnow())
    parent = message.reply_to or (message.conversation if message.conversation else None)
    subject = message.extra.get("subject", "")
    if parent:
        chain = message_ids(message.extra.get("references", ""))
        if message.conversation and message.conversation not in chain:
            chain.insert(0, message.conversation)
        if parent not in chain:
            chain.append(parent)
        mail["In-Reply-To"] = parent
        mail["References"] = " ".join(chain)
        mail["Subject"] = reply_subject(subject or options.subject)
    else:
        mail["Subject"] = subject or options.subject
    mail.set_content(message.text)
    if message.audio:
        mime, filename = audio_mime(message.audio)
        main, sub = mime.split("/", 1)
        mail.add_attachment(message.audio, maintype=main, subtype=sub, filename=filename)
    return mail


# --- the channel -------------------------------------------------------------------------------------------------


class EmailChannel(Channel):
    kind: ClassVar[str] = "email"

    def __init__(
        self, name: str, options: EmailOptions, password: Callable[[], str], *, max_attachment_bytes: int = 2_000_000
    ):
        super().__init__(name)
        self.options = options
        self._password = password  # called when connecting: the secret is no attribute of the channel
        self.max_attachment_bytes = max_attachment_bytes
        self._imap: Any = None  # the long-lived IMAPClient: touched only by a worker thread holding `_using`
        self._using = threading.Lock()
        self._closing = threading.Event()  # close() asks an idling or polling fetch to stop within a second
        self._idle_supported = False
        self.own_address = parseaddr(options.address)[1].lower()
        self.dnsfunc: Callable[..., Any] | None = None  # dkimpy's DNS lookup for verify_dkim (None: the DNS)
        self._unfiled: dict[str, bytes] = {}  # sent mails whose copy `settle` files in the sent folder
        # the sent folder answers `already_sent` for sure only where the server files each mail before its 250;
        # a copy appended here comes after it, so a kill in between may send a mail twice (docs/channels.md)
        self.can_tell_sent = bool(options.sent_folder) and not options.append_sent

    @classmethod
    def from_entry(cls, entry: ChannelEntryLike, secrets: Mapping[str, str]) -> EmailChannel:
        options = parse_options(entry.name, entry.options)
        if not secrets.get("password"):
            raise ValueError(f"{entry.name}: the secret `password` is missing (secret_env or secrets_file)")
        password = secrets["password"]
        return cls(entry.name, options, lambda: password, max_attachment_bytes=entry.max_attachment_bytes)

    # connections

    def _ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.options.ca_file or None)

    def _connect_imap(self) -> Any:
        from imapclient import IMAPClient

        o = self.options
        client = IMAPClient(
            o.imap_host,
            port=o.imap_port_or_default,
            ssl=o.imap_tls == "tls",
            ssl_context=self._ssl_context() if o.imap_tls == "tls" else None,
            timeout=o.timeout_s,
        )
        try:
            if o.imap_tls == "starttls":
                client.starttls(self._ssl_context())
            client.login(o.login, self._password())
        except Exception:
            _quietly(client.logout)
            raise
        return client

    async def _in_thread(self, work: Callable[[], T]) -> T:
        """`work` in a worker thread; the network's and the server's errors (socket, TLS, IMAP NO/BAD, a refused
        login) become ChannelDown: the runner backs off and tries again."""
        try:
            return await asyncio.to_thread(work)
        except (ChannelDown, ChannelRefused):
            raise
        except Exception as exc:  # imaplib's errors, socket errors, ssl errors: the server is not usable now
            raise ChannelDown(f"{self.name}: IMAP {type(exc).__name__}: {exc}") from exc

    def _with_client(self, work: Callable[[Any], T]) -> T:
        """`work(client)` on the long-lived connection, one thread at a time; a failure drops the connection (the
        next call connects again)."""
        with self._using:
            if self._imap is None:
                self._imap = self._connect_imap()
                self._idle_supported = bool(self.options.idle and self._imap.has_capability("IDLE"))
            try:
                return work(self._imap)
            except ChannelRefused:
                raise
            except Exception:
                client, self._imap = self._imap, None
                _quietly(client.shutdown)
                raise

    async def open(self) -> None:
        self._closing.clear()
        await self._in_thread(lambda: self._with_client(lambda client: None))

    async def close(self) -> None:
        """Logs out once a fetch still running in its thread (a cancelled one idles on) has let go of the
        connection: it is asked to stop, and does within a second."""
        self._closing.set()

        def logout() -> None:
            if not self._using.acquire(timeout=self.options.timeout_s):
                return  # a thread stuck on the network: its socket's timeout ends it
            try:
                client, self._imap = self._imap, None
            finally:
                self._using.release()
            if client is not None:
                _quietly(client.logout)

        await asyncio.to_thread(logout)

    # in

    async def fetch(self, cursor: str | None, *, wait_s: float) -> Batch:
        self._closing.clear()
        return await self._in_thread(lambda: self._with_client(lambda client: self._fetch(client, cursor, wait_s)))

    def _fetch(self, client: Any, cursor: str | None, wait_s: float) -> Batch:
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            status = client.select_folder(self.options.folder, readonly=True)
            validity = int(status[b"UIDVALIDITY"])
            last = _cursor_uid(cursor, validity)
            if last is None:
                uids = sorted(client.search(["ALL"]))[-self.options.batch :]
            else:
                uids = sorted(u for u in client.search(["UID", f"{last + 1}:*"]) if u > last)[: self.options.batch]
            remaining = deadline - time.monotonic()
            if uids or remaining <= 0 or self._closing.is_set():
                break
            if self._idle_supported:
                self._idle(client, deadline)
            else:
                self._closing.wait(min(self.options.poll_s, remaining))
        if not uids:
            return Batch(messages=(), cursor=cursor if last is not None else f"{validity}:0")
        messages = self._read(client, validity, uids)
        return Batch(messages=tuple(messages), cursor=f"{validity}:{uids[-1]}")

    def _idle(self, client: Any, deadline: float) -> None:
        """IDLE until the server reports a change, the deadline passes or close() asks (checked every second)."""
        client.idle()
        try:
            while not self._closing.is_set():
                left = deadline - time.monotonic()
                if left <= 0 or client.idle_check(timeout=min(1.0, left)):
                    break
        finally:
            client.idle_done()

    def _read(self, client: Any, validity: int, uids: list[int]) -> list[Incoming]:
        sizes = client.fetch(uids, [b"RFC822.SIZE", b"INTERNALDATE"])
        whole = [u for u in uids if int(sizes.get(u, {}).get(b"RFC822.SIZE", 0)) <= self.options.max_message_bytes]
        heads = [u for u in uids if u not in whole]
        bodies: dict[int, bytes] = {}
        if whole:
            bodies.update({u: d[b"BODY[]"] for u, d in client.fetch(whole, [b"BODY.PEEK[]"]).items()})
        if heads:
            bodies.update({u: d[b"BODY[HEADER]"] for u, d in client.fetch(heads, [b"BODY.PEEK[HEADER]"]).items()})
        out = []
        for uid in uids:
            if uid not in bodies:
                continue
            received = sizes.get(uid, {}).get(b"INTERNALDATE")
            at = received if isinstance(received, datetime) else None
            try:
                incoming = self._incoming(validity, uid, bodies[uid], at, headers_only=uid in heads)
            except Exception as exc:  # noqa: BLE001 - one mail that cannot be read must not stop the mailbox
                incoming = self._set_aside(validity, uid, bodies[uid], at, exc)
            if incoming is not None:
                out.append(incoming)
        return out

    def _incoming(
        self, validity: int, uid: int, raw: bytes, received: datetime | None, *, headers_only: bool
    ) -> Incoming | None:
        o = self.options
        mail = parse_mail(
            raw,
            ref_prefix=f"{validity}:{uid}",
            fallback_id=f"imap:{validity}:{uid}",
            max_attachment_bytes=self.max_attachment_bytes,
            received=received,
            authserv_id=o.trusted_authserv_id.strip() if o.require_authentication else None,
            alignment=o.alignment,
            verify_dkim=o.verify_dkim,
            receiving_hosts=o.receiving_host_names,
            dnsfunc=self.dnsfunc,
        )
        if mail.automatic or mail.sender == self.own_address:
            return None  # an autoresponder's or a bounce (answering could loop), or the persona's own mail
        extra = {"subject": mail.subject, "message_id": mail.message_id, "imap_uid": f"{validity}:{uid}"}
        if mail.references:
            extra["references"] = mail.references
        if headers_only:
            extra["truncated"] = "headers only: larger than max_message_bytes"
        text = strip_quoted_tail(mail.text)
        if text != mail.text:
            extra["quoted_tail"] = "left out"
        unverified = ""
        if mail.sender_check is not None:
            extra["authentication"] = mail.sender_check.reason
            unverified = "" if mail.sender_check.verified else mail.sender_check.reason or "not authenticated"
        return Incoming(
            channel=self.name,
            platform_id=mail.message_id,
            sender=mail.sender,
            sender_name=mail.sender_name,
            conversation=thread_root(mail.message_id, mail.in_reply_to, mail.references),
            text=text,
            sent_at=mail.sent_at,
            reply_to=mail.in_reply_to,
            attachments=mail.attachments,
            extra=extra,
            unverified=unverified,
            private=True,
        )  # a mail thread with the persona: an answer goes to them alone

    def _set_aside(self, validity: int, uid: int, raw: bytes, received: datetime | None, error: Exception) -> Incoming:
        """A mail that cannot be read, handed out `quarantined` under its mailbox UID (its Message-ID is not to be
        trusted either): the manager records it set aside — no text, no sender anyone is taken for — and the cursor
        moves past it; the mail itself stays in the mailbox."""
        why = str(error) if isinstance(error, UnreadableMail) else f"cannot be read ({type(error).__name__}: {error})"
        claimed = next((f.value for f in header_fields(raw) if f.key == "from"), "")
        return Incoming(
            channel=self.name,
            platform_id=f"imap:{validity}:{uid}",
            sender=printable(claimed)[:200] or "(no From)",
            sender_name="",
            conversation="",
            text="",
            sent_at=received or utcnow(),
            extra={"imap_uid": f"{validity}:{uid}"},
            quarantined=f"{why[:400]} (it stays in the mailbox {self.options.folder}, UID {uid})",
        )

    async def download(self, attachment: Attachment, *, max_bytes: int) -> bytes:
        if attachment.size > max_bytes:
            raise ChannelRefused(f"{attachment.name}: {attachment.size} bytes, more than {max_bytes}")
        if attachment.data is not None:
            return attachment.data
        try:
            validity, uid, index = (int(p) for p in attachment.ref.split(":"))
        except ValueError as exc:
            raise ChannelRefused(f"{attachment.ref!r} is not this channel's attachment reference") from exc

        def work(client: Any) -> bytes:
            status = client.select_folder(self.options.folder, readonly=True)
            if int(status[b"UIDVALIDITY"]) != validity:
                raise ChannelRefused(f"{attachment.name}: the mailbox was rebuilt (UIDVALIDITY changed)")
            found = client.fetch([uid], [b"BODY.PEEK[]"]).get(uid)
            if not found:
                raise ChannelRefused(f"{attachment.name}: the mail is gone")
            return part_bytes(found[b"BODY[]"], index)

        data = await self._in_thread(lambda: self._with_client(work))
        if len(data) > max_bytes:
            raise ChannelRefused(f"{attachment.name}: {len(data)} bytes, more than {max_bytes}")
        return data

    # out

    def message_id_for(self, message: Outgoing) -> str:
        return outgoing_message_id(self.name, message.idempotency_key, self.options.domain)

    async def send(self, message: Outgoing) -> str:
        import aiosmtplib

        o = self.options
        message_id = self.message_id_for(message)
        parent = message.reply_to or message.conversation
        if parent and "subject" not in message.extra:  # the outbox keeps no headers: the thread's mail has them
            found = await asyncio.to_thread(self._thread_headers, parent)
            if found:
                message = replace(message, extra={**found, **message.extra})
        mail = build_mail(o, message, message_id)
        try:
            await aiosmtplib.send(
                mail,
                hostname=o.smtp_server,
                port=o.smtp_port_or_default,
                username=o.login,
                password=self._password(),
                use_tls=o.smtp_tls == "tls",
                start_tls=o.smtp_tls == "starttls",
                tls_context=self._ssl_context() if o.smtp_tls != "none" else None,
                timeout=o.timeout_s,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            raise ChannelRefused(f"{self.name}: recipient refused: {message.recipient}") from exc
        except aiosmtplib.SMTPResponseException as exc:
            if 500 <= exc.code < 600 and not isinstance(exc, aiosmtplib.SMTPAuthenticationError):
                raise ChannelRefused(f"{self.name}: SMTP {exc.code} {exc.message}") from exc
            raise ChannelDown(f"{self.name}: SMTP {exc.code} {exc.message}") from exc
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise ChannelDown(f"{self.name}: SMTP {type(exc).__name__}: {exc}") from exc
        if o.sent_folder and o.append_sent:
            self._unfiled[message_id] = bytes(mail)  # filed by `settle`, once the outbox has recorded the send
        return message_id

    async def settle(self, message: Outgoing, platform_id: str) -> None:
        """The sent mail's copy in the sent folder (`append_sent`): after the outbox recorded the send, so a kill
        before it costs the copy, never a second mail."""
        raw = self._unfiled.pop(platform_id, None)
        if raw is not None:
            await self._in_thread(lambda: self._append_sent(raw))

    def _thread_headers(self, parent: str) -> dict[str, str] | None:
        """The subject and References of the mail `parent` names (the inbox, else the sent folder), or None when it
        cannot be found or the server cannot be asked now (the answer then starts from the configured subject)."""
        try:
            client = self._connect_imap()
        except Exception:  # noqa: BLE001 - a missing subject is no reason not to send
            return None
        try:
            for folder in dict.fromkeys(f for f in (self.options.folder, self.options.sent_folder) if f):
                if not client.folder_exists(folder):
                    continue
                client.select_folder(folder, readonly=True)
                uids = client.search(["HEADER", "Message-ID", parent])
                if uids:
                    head = client.fetch(uids[-1:], [b"BODY.PEEK[HEADER]"])[uids[-1]][b"BODY[HEADER]"]
                    mail = BytesParser(policy=policy.default).parsebytes(head, headersonly=True)
                    found = {"subject": str(mail.get("Subject", ""))}
                    refs = message_ids(str(mail.get("References", ""))) + [parent]
                    found["references"] = " ".join(dict.fromkeys(refs))
                    return found
            return None
        except Exception:  # noqa: BLE001 - as above
            return None
        finally:
            _quietly(client.logout)

    def _append_sent(self, raw: bytes) -> None:
        client = self._connect_imap()  # its own short connection: fetch may be idling on the other one
        try:
            if not client.folder_exists(self.options.sent_folder):
                client.create_folder(self.options.sent_folder)
            client.append(self.options.sent_folder, raw, flags=(b"\\Seen",))
        finally:
            _quietly(client.logout)

    async def already_sent(self, message: Outgoing) -> str | None:
        """The Message-ID when a mail with this key's Message-ID is in the sent folder (or None without one)."""
        if not self.options.sent_folder:
            return None
        message_id = self.message_id_for(message)

        def look() -> bool:
            client = self._connect_imap()
            try:
                if not client.folder_exists(self.options.sent_folder):
                    return False
                client.select_folder(self.options.sent_folder, readonly=True)
                return bool(client.search(["HEADER", "Message-ID", message_id]))
            finally:
                _quietly(client.logout)

        return message_id if await self._in_thread(look) else None


def _cursor_uid(cursor: str | None, validity: int) -> int | None:
    """The last UID handed out, or None when there is no cursor or the mailbox's UIDVALIDITY changed."""
    if not cursor:
        return None
    seen_validity, _, uid = cursor.partition(":")
    if not (seen_validity.isdigit() and uid.isdigit()) or int(seen_validity) != validity:
        return None
    return int(uid)


def _quietly(close: Callable[[], Any]) -> None:
    try:
        close()
    except Exception:  # noqa: BLE001 - closing a connection that may already be broken
        pass
