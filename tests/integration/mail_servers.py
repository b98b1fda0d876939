"""A real mail system on loopback for the e-mail channel's tests: Dovecot (IMAP with IDLE, plain + STARTTLS and implicit
TLS, LMTP
delivery) started with a throwaway configuration (passwd-file users, maildirs in a temporary directory, a
self-signed certificate for 127.0.0.1), and an SMTP server (aiosmtpd, with AUTH and STARTTLS) that hands every accepted
mail to Dovecot's LMTP, so a mail sent over SMTP lands in the
recipient's Dovecot mailbox the way a real MTA's local delivery does. Like a receiving MTA with a DKIM milter (Postfix
with OpenDKIM), the SMTP server writes its `Received: … by mx.anima.test with ESMTP …` (RFC 5321 §4.4), checks the
mail's DKIM signature with dkimpy — the keys are "published" through dkimpy's `dnsfunc` hook, so nothing asks the
real DNS — and stamps its verdict on top (`Authentication-Results: mx.anima.test; dkim=pass header.d=…`). How it
receives is data the tests set (`MailServers.receiving`, a `Receiving`): by default it removes NO forged
`Authentication-Results` (RFC 8601 §5 asks it to; the channel must hold without it), `strip="exact"` removes those
under its own name spelled exactly (the hostile tester's server), the verdict may sit above its Received (default),
below it, or the server may write no Received at all; `file_sent` files a copy of each submitted mail in the
sender's `Sent` folder before it answers 250, as Gmail's or Exchange's submission servers do.
`signed()` signs a mail the way the sender's own server would.

Runs as root (Dovecot's own `dovenull`/`dovecot` users for its login and internal processes) or as an ordinary user
(then everything runs as that user). Dovecot comes from Debian (`make system` installs dovecot-imapd and
dovecot-lmtpd); without it the tests skip and say so.
"""

from __future__ import annotations

import base64
import functools
import grp
import os
import pwd
import re
import shutil
import smtplib
import socket
import ssl
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path
from typing import Any, Literal

DOVECOT = shutil.which("dovecot") or "/usr/sbin/dovecot"
LMTP_BINARY = "/usr/lib/dovecot/lmtp"
USERS = {"anima@example.org": "anima-secret", "ann@example.org": "ann-secret"}
AUTHSERV_ID = "mx.anima.test"  # the name the SMTP server stamps its Authentication-Results with
SELECTOR = "anima"
PUBLISHED = ("example.org", "evil.org")  # the domains whose DKIM keys the stand-in DNS answers for


@functools.cache
def dkim_key(domain: str) -> tuple[bytes, bytes]:
    """A domain's DKIM key: the private key (PEM) and the TXT record that publishes its public half."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return pem, b"v=DKIM1; k=rsa; p=" + base64.b64encode(der)


def dns_txt(name: bytes, timeout: int = 5) -> bytes | None:
    """dkimpy's `dnsfunc`: the TXT record of `<selector>._domainkey.<domain>` for the published domains."""
    wanted = name.decode().rstrip(".").lower()
    for domain in PUBLISHED:
        if wanted == f"{SELECTOR}._domainkey.{domain}":
            return dkim_key(domain)[1]
    return None


def signed(mail: EmailMessage, domain: str = "example.org") -> bytes:
    """`mail` as it leaves its sender's server: DKIM-signed for `domain` (a key published above, or not)."""
    import dkim

    raw = mail.as_bytes(policy=policy.SMTP)
    return bytes(dkim.sign(raw, SELECTOR.encode(), domain.encode(), dkim_key(domain)[0])) + raw


def submit(smtp_port: int, raw: bytes, *, sender: str, to: str, login: str = "ann@example.org") -> None:
    with smtplib.SMTP("127.0.0.1", smtp_port, timeout=20) as smtp:
        smtp.login(login, USERS[login])
        smtp.sendmail(sender, [to], raw)


@dataclass
class Receiving:
    """How the stand-in receiving server treats a mail (see the module's docstring)."""

    strip: Literal["none", "exact"] = "none"
    verdict: Literal["above_received", "below_received", "no_received"] = "above_received"
    file_sent: bool = False


def _own_results(field: bytes) -> bool:
    name, _, value = field.partition(b":")
    return name == b"Authentication-Results" and value.split(b";")[0].split()[:1] == [AUTHSERV_ID.encode()]


def stamp(raw: bytes, receiving: Receiving | None = None, *, helo: str = "client.example", rcpt: str = "") -> bytes:
    """What a receiving server with a DKIM milter does: (maybe) drop the Authentication-Results that claim its
    name, verify the (topmost) DKIM signature, write its Received and its verdict on top."""
    import dkim

    receiving = receiving or Receiving()
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        head, sep, body = raw.partition(b"\n\n")
    fields = re.split(rb"\r?\n(?![ \t])", head)
    if receiving.strip == "exact":
        raw = b"\r\n".join(f for f in fields if not _own_results(f)) + sep + body
    if not any(f.lower().startswith(b"dkim-signature:") for f in fields):
        verdict = "dkim=none"
    else:
        checker = dkim.DKIM(raw)
        try:
            passed = bool(checker.verify(dnsfunc=dns_txt))
        except dkim.DKIMException:
            passed = False
        domain = (checker.domain or b"").decode(errors="replace")
        verdict = f"dkim={'pass' if passed else 'fail'} header.d={domain or 'unknown'}"
    results = f"Authentication-Results: {AUTHSERV_ID}; {verdict}\r\n".encode()
    received = (
        f"Received: from {helo} (localhost [127.0.0.1])\r\n\tby {AUTHSERV_ID} with ESMTP id "
        f"{os.urandom(6).hex()}\r\n\tfor <{rcpt}>; {format_datetime(datetime.now(UTC))}\r\n"
    ).encode()
    if receiving.verdict == "no_received":
        return results + raw
    if receiving.verdict == "below_received":
        return received + results + raw
    return results + received + raw


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing() -> str | None:
    if not (os.path.exists(DOVECOT) and os.access(DOVECOT, os.X_OK)):
        return "Dovecot is not installed (make system: apt-get install dovecot-imapd dovecot-lmtpd)"
    if not os.path.exists(LMTP_BINARY):
        return "Dovecot's LMTP is not installed (make system: apt-get install dovecot-lmtpd)"
    return None


@dataclass
class MailServers:
    root: Path
    imap_port: int  # plain, with STARTTLS
    imaps_port: int  # implicit TLS
    lmtp_port: int
    smtp_port: int  # with STARTTLS
    certificate: Path  # the servers' self-signed certificate (a client's CA file)
    dovecot: subprocess.Popen[bytes]
    smtp: Any  # aiosmtpd.controller.Controller

    @property
    def receiving(self) -> Receiving:
        return self.smtp.handler.receiving  # type: ignore[no-any-return]

    @receiving.setter
    def receiving(self, value: Receiving) -> None:
        self.smtp.handler.receiving = value

    @contextmanager
    def receiving_as(self, **how: Any) -> Iterator[Receiving]:
        """The SMTP server receives as `how` says inside the block (the module's servers are shared)."""
        before = self.receiving
        self.receiving = Receiving(**how)
        try:
            yield self.receiving
        finally:
            self.receiving = before

    def stop(self) -> None:
        self.smtp.stop()
        subprocess.run([DOVECOT, "-c", str(self.root / "dovecot.conf"), "stop"], capture_output=True, timeout=20)
        try:
            self.dovecot.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.dovecot.kill()
            self.dovecot.wait(timeout=10)

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _dovecot_conf(root: Path, imap_port: int, imaps_port: int, lmtp_port: int) -> str:
    me = pwd.getpwuid(os.getuid())
    group = grp.getgrgid(os.getgid()).gr_name
    if os.getuid() == 0:  # Dovecot's own users, and Debian's `mail` user owns the maildirs (uid 0 may not)
        login_user, internal_user, internal_group = "dovenull", "dovecot", "dovecot"
        mail_uid, mail_gid = _mail_owner()
    else:
        login_user, internal_user, internal_group = me.pw_name, me.pw_name, group
        mail_uid, mail_gid = os.getuid(), os.getgid()
    return f"""
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = yes
ssl_cert = <{root}/cert.pem
ssl_key = <{root}/key.pem
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = {login_user}
default_internal_user = {internal_user}
default_internal_group = {internal_group}
first_valid_uid = {mail_uid}
first_valid_gid = {mail_gid}
mail_location = maildir:~/Maildir
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={mail_uid} gid={mail_gid} home={root}/home/%u allow_all_users=yes
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Sent {{
    special_use = \\Sent
    auto = create
  }}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {lmtp_port}
  }}
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"""


def _mail_owner() -> tuple[int, int]:
    owner = pwd.getpwnam("mail")
    return owner.pw_uid, owner.pw_gid


class _DeliverOverLmtp:
    """aiosmtpd's handler: every accepted mail goes to Dovecot's LMTP (the local delivery a real MTA does), stamped
    as `receiving` says; with `receiving.file_sent`, a copy goes to the sender's Sent folder before the 250."""

    def __init__(self, lmtp_port: int, imap_port: int):
        self.lmtp_port, self.imap_port = lmtp_port, imap_port
        self.receiving = Receiving()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        import asyncio

        receiving = self.receiving
        content = envelope.original_content or envelope.content
        login = session.auth_data.login.decode() if getattr(session, "auth_data", None) is not None else ""

        def deliver() -> None:
            with smtplib.LMTP("127.0.0.1", self.lmtp_port, timeout=20) as lmtp:
                lmtp.sendmail(
                    envelope.mail_from,
                    envelope.rcpt_tos,
                    stamp(
                        content, receiving, helo=str(session.host_name or "unknown"), rcpt=",".join(envelope.rcpt_tos)
                    ),
                )
            if receiving.file_sent and login in USERS:
                self.file_copy(login, content)

        try:
            await asyncio.to_thread(deliver)
        except smtplib.SMTPRecipientsRefused:
            return "550 no such mailbox"
        except (smtplib.SMTPException, OSError) as exc:
            return f"451 delivery failed: {exc}"
        return "250 delivered"

    def file_copy(self, login: str, content: bytes) -> None:
        from imapclient import IMAPClient

        client = IMAPClient("127.0.0.1", port=self.imap_port, ssl=False, timeout=20)
        try:
            client.login(login, USERS[login])
            client.append("Sent", content, flags=(b"\\Seen",))
        finally:
            client.logout()


def _authenticate(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> Any:
    from aiosmtpd.smtp import AuthResult, LoginPassword

    ok = isinstance(auth_data, LoginPassword) and USERS.get(auth_data.login.decode()) == auth_data.password.decode()
    return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)


def _wait_port(port: int, process: subprocess.Popen[bytes], root: Path, deadline_s: float = 20) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if process.poll() is not None:
            raise RuntimeError(f"dovecot exited ({process.returncode}): {(root / 'dovecot.log').read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"dovecot did not listen on {port} within {deadline_s}s")


def _self_signed_certificate(root: Path) -> Path:
    """A certificate for 127.0.0.1 and localhost (openssl comes with Dovecot): the servers' TLS and the clients' CA."""
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(root / "key.pem"),
            "-out",
            str(root / "cert.pem"),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return root / "cert.pem"


def start(root: Path) -> MailServers:
    from aiosmtpd.controller import Controller

    root.mkdir(parents=True, exist_ok=True)
    for sub in ("run", "state", "home"):
        (root / sub).mkdir(exist_ok=True)
    os.chmod(root, 0o755)
    if os.getuid() == 0:
        os.chown(root / "home", *_mail_owner())
    (root / "passwd").write_text("".join(f"{user}:{{PLAIN}}{password}::::::\n" for user, password in USERS.items()))
    imap_port, imaps_port, lmtp_port, smtp_port = free_port(), free_port(), free_port(), free_port()
    certificate = _self_signed_certificate(root)
    (root / "dovecot.conf").write_text(_dovecot_conf(root, imap_port, imaps_port, lmtp_port))
    dovecot = subprocess.Popen(
        [DOVECOT, "-F", "-c", str(root / "dovecot.conf")],
        stdout=subprocess.DEVNULL,
        stderr=open(root / "dovecot.stderr", "wb"),
    )
    try:
        for port in (imap_port, imaps_port, lmtp_port):
            _wait_port(port, dovecot, root)
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(root / "cert.pem", root / "key.pem")
        warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
        smtp = Controller(
            _DeliverOverLmtp(lmtp_port, imap_port),
            hostname="127.0.0.1",
            port=smtp_port,
            authenticator=_authenticate,
            auth_required=True,
            auth_require_tls=False,
            ready_timeout=20,
            tls_context=tls,
        )
        smtp.start()
    except BaseException:
        dovecot.kill()
        dovecot.wait(timeout=10)
        raise
    return MailServers(
        root=root,
        imap_port=imap_port,
        imaps_port=imaps_port,
        lmtp_port=lmtp_port,
        smtp_port=smtp_port,
        certificate=certificate,
        dovecot=dovecot,
        smtp=smtp,
    )


@contextmanager
def running() -> Iterator[MailServers]:
    """Dovecot and the SMTP server for a test module; not under pytest's tmp dir (0700 there, and Dovecot's own
    users must reach the maildirs)."""
    root = Path(tempfile.mkdtemp(prefix="anima-mail-"))
    servers = start(root)
    try:
        yield servers
    finally:
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)
