"""Is a mail's From the sender's? The receiving server's verdict, read as a careful mail client reads it.

A mail's From header is whatever its sender typed, so it names nobody by itself. The server that received the mail
checked DKIM signatures and SPF and wrote what it found in an `Authentication-Results` header (RFC 8601). A sender
can write such headers too — under any name, the receiving server's own included, in any case, folded, encoded, as
many as they like — and a receiving server is only asked (RFC 8601 §5) to remove the ones under its own name, which
not every server does exactly (one that compares the name case-sensitively lets `MX.EXAMPLE.ORG` through). So this
module does not count on the removal: it believes a header only by where it stands.

Every server that takes a mail in writes its `Received` header on top of what it received (RFC 5321 §4.4), so
whatever the sender wrote lies below the receiving server's own `Received`, and only what stands above it was
written on the receiving side. Read from the top of the header (raw, unfolded, nothing decoded; the header ends at
the first empty line, or at a line that is not a header field):
- the local delivery's own hops (`Received: … with LMTP`, `with local`) and `Received` fields without a `by` are
  passed over;
- the first other `Received` must be written `by` one of the channel's receiving hosts (`receiving_hosts`, by
  default the authserv-id): that is the receiving server's own, and the `Authentication-Results` above it whose
  authserv-id is `trusted_authserv_id` are its verdict — nothing below it counts, whatever it says;
- when that `Received` is someone else's (another name: a misconfiguration) or there is none, nothing is believed
  (the reason says which `Received` was found). A receiving server must write its `Received` (RFC 5321 §4.4 says it
  MUST; every real one does): behind one that writes none, a sender's forged `Received … by <your host>` would look
  like the border — but so would nothing else, and the owner's own signed mail is then never believed either, which
  is how the misconfiguration shows itself at once.
Names compare as RFC 8601 and RFC 5322 have them: header field names case-insensitively, and the authserv-id — a
domain name here (RFC 8601 §2.5 recommends one) — case-insensitively too, as DNS names compare (RFC 4343); its
position, not its spelling, is what makes it the receiving server's.

In those headers the From address is accepted only when
- DKIM passed for a signing domain (`header.d`) aligned with the From domain, or
- SPF passed for an envelope sender (`smtp.mailfrom`) whose domain is aligned with it,
where aligned is DMARC's (RFC 7489 §3.1): `relaxed` — the same organisational domain (the Public Suffix List's
registrable domain: `mail.example.org` and `example.org` are aligned, `example.co.uk` and `other.co.uk` are not) —
or `strict`, the same domain. Anything else — no such header, a failure, a pass for another domain — leaves the
sender unverified, and says why.

Libraries: `authres` parses the header (RFC 8601 and its extensions: quoted values, comments, `none`), the parser
of the dkimpy / authheaders family; `publicsuffixlist` gives the organisational domain from the list it ships
(nothing is fetched at run time); dkimpy verifies a signature itself (`verify_dkim`). The header fields are split
here, not by the `email` package, because position is the point: its parser decodes encoded words, and it ends the
header at a line it cannot read without saying where.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

Alignment = Literal["relaxed", "strict"]
FIELD_NAME = re.compile(r"[!-9;-~]+")  # RFC 5322 ftext: printable ASCII but the colon
LINE_END = re.compile(r"\r\n|\n")
COMMENT = re.compile(r"\((?:[^()\\]|\\.)*\)")  # one level; applied until none is left (nested comments)
BY_HOST = re.compile(r"(?:^|\s)by\s+([^\s;]+)", re.IGNORECASE)
WITH_PROTOCOL = re.compile(r"(?:^|\s)with\s+([A-Za-z0-9-]+)", re.IGNORECASE)
DELIVERY = frozenset({"lmtp", "lmtpa", "lmtps", "lmtpsa", "local"})  # the mailbox's own delivery hop


@dataclass(frozen=True)
class SenderCheck:
    verified: bool
    reason: str  # why not (empty when verified), or what verified it ("dkim=pass header.d=example.org")


@dataclass(frozen=True)
class HeaderField:
    name: str  # as written (a sender may write any case; a trailing space before the colon is obsolete syntax)
    value: str  # unfolded, not decoded

    @property
    def key(self) -> str:
        return self.name.strip().lower()


@dataclass(frozen=True)
class Result:
    """One method's result in an Authentication-Results header the channel trusts."""

    method: str  # dkim | spf | …
    result: str  # pass | fail | none | …
    properties: tuple[tuple[str, str], ...]  # (ptype.property, value): ("header.d", "example.org")

    def get(self, key: str) -> str:
        return next((value for name, value in self.properties if name == key), "")


@lru_cache(maxsize=1)
def _suffixes() -> Any:
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()  # the list the package ships: no download


def organisational_domain(domain: str) -> str:
    """The registrable domain (`example.org` for `mail.example.org`); a domain the list cannot place is its own."""
    domain = domain.strip().rstrip(".").lower()
    return str(_suffixes().privatesuffix(domain) or domain)


def aligned(domain: str, from_domain: str, mode: Alignment = "relaxed") -> bool:
    domain, from_domain = domain.strip().rstrip(".").lower(), from_domain.strip().rstrip(".").lower()
    if not domain or not from_domain:
        return False
    if mode == "strict":
        return domain == from_domain
    return organisational_domain(domain) == organisational_domain(from_domain)


def _host(name: str) -> str:
    return name.strip().rstrip(".").lower()


def header_fields(raw: bytes) -> list[HeaderField]:
    """The mail's header fields in order, each unfolded (a line that starts with a space or a tab continues the one
    above) and not decoded. The header ends at the first empty line; a line that is neither a field nor a
    continuation ends it too (what follows is not read as header)."""
    text = raw.decode("utf-8", "replace")
    fields: list[tuple[str, list[str]]] = []
    for line in LINE_END.split(text):
        if line == "":
            break
        if line[0] in " \t":
            if not fields:
                break
            fields[-1][1].append(line)
            continue
        name, colon, value = line.partition(":")
        if not colon or not FIELD_NAME.fullmatch(name.rstrip(" \t")):
            break
        fields.append((name, [value]))
    return [HeaderField(name, "".join(parts).strip()) for name, parts in fields]


def _without_comments(value: str) -> str:
    previous = None
    while previous != value:
        previous, value = value, COMMENT.sub(" ", value)
    return value


def received_by(value: str) -> tuple[str, str]:
    """A Received field's `by` host and its `with` protocol after it (each "" when absent), read with its comments
    left out (a comment may quote the sending side's own words)."""
    stamp = _without_comments(value).rpartition(";")[0] or _without_comments(value)
    found = BY_HOST.search(stamp)
    if found is None:
        return "", ""
    protocol = WITH_PROTOCOL.search(stamp, found.end())
    return _host(found.group(1)), (protocol.group(1).lower() if protocol else "")


def receiving_side(fields: Sequence[HeaderField], hosts: Iterable[str]) -> tuple[list[str] | None, str]:
    """The Authentication-Results values standing above the receiving server's own Received — the first Received
    that is not the mailbox's delivery hop (nor a Received without `by`) — when that one is written by one of
    `hosts`; else None and why."""
    wanted = {_host(h) for h in hosts if h.strip()}
    above: list[str] = []
    for field in fields:
        if field.key == "authentication-results":
            above.append(field.value)
        elif field.key == "received":
            host, protocol = received_by(field.value)
            if not host or protocol in DELIVERY:
                continue
            if host in wanted:
                return above, ""
            return None, f"the receiving server's Received is by {host}, not {' or '.join(sorted(wanted))}"
    return None, f"no Received by {' or '.join(sorted(wanted))}"


def trusted_results(headers: Sequence[str], authserv_id: str) -> tuple[list[Result], int]:
    """The results in the headers written by `authserv_id` (compared as a domain name: case-insensitively), and how
    many headers were passed over (another authserv-id, or unreadable)."""
    from authres import AuthenticationResultsHeader

    wanted = _host(authserv_id)
    results: list[Result] = []
    ignored = 0
    for value in headers:
        try:
            header = AuthenticationResultsHeader.parse(f"Authentication-Results: {' '.join(str(value).split())}")
        except Exception:  # noqa: BLE001 - authres raises several kinds for a malformed header: it counts as absent
            ignored += 1
            continue
        if _host(str(header.authserv_id or "")) != wanted:
            ignored += 1
            continue
        for found in header.results:
            props = tuple((f"{p.type}.{p.name}".lower(), str(p.value or "")) for p in found.properties)
            results.append(Result(str(found.method).lower(), str(found.result).lower(), props))
    return results, ignored


def _domain_of(value: str) -> str:
    """The domain of `user@domain`, `@domain`, `<user@domain>` or a bare domain."""
    return value.strip().strip("<>").rpartition("@")[2].strip().lower()


def check_results(results: Sequence[Result], from_domain: str, mode: Alignment = "relaxed") -> SenderCheck:
    """Verified when DKIM passed for an aligned `header.d` or SPF passed for an aligned `smtp.mailfrom`."""
    seen: list[str] = []
    for found in results:
        if found.method == "dkim":
            domain = found.get("header.d") or _domain_of(found.get("header.i"))
            label = f"dkim={found.result}" + (f" header.d={domain}" if domain else "")
        elif found.method == "spf":
            domain = _domain_of(found.get("smtp.mailfrom"))
            label = f"spf={found.result}" + (f" smtp.mailfrom={domain}" if domain else "")
        else:
            continue
        if found.result == "pass" and aligned(domain, from_domain, mode):
            return SenderCheck(True, label)
        seen.append(label + ("" if found.result != "pass" else f" (not aligned with {from_domain})"))
    return SenderCheck(False, "; ".join(seen) if seen else "no DKIM or SPF result")


def check_signature(
    raw: bytes, from_domain: str, mode: Alignment = "relaxed", dnsfunc: Callable[..., Any] | None = None
) -> SenderCheck:
    """The mail's own (topmost) DKIM signature, verified here with dkimpy — its key looked up in the DNS (or through
    `dnsfunc`, dkimpy's hook) — and its d= aligned with the From domain."""
    import dkim

    checker = dkim.DKIM(raw)
    try:
        passed = bool(checker.verify(dnsfunc=dnsfunc) if dnsfunc is not None else checker.verify())
    except dkim.DKIMException as exc:
        return SenderCheck(False, f"own dkim check: {str(exc)[:200]}")
    domain = (checker.domain or b"").decode(errors="replace").lower()
    if not passed:
        return SenderCheck(False, f"own dkim check: the signature of {domain or 'no domain'} does not verify")
    if not aligned(domain, from_domain, mode):
        return SenderCheck(False, f"own dkim check: signed by {domain} (not aligned with {from_domain})")
    return SenderCheck(True, f"own dkim check: pass d={domain}")


def check_sender(
    raw: bytes,
    from_address: str,
    authserv_id: str,
    mode: Alignment = "relaxed",
    *,
    receiving_hosts: Sequence[str] = (),
    verify_dkim: bool = False,
    dnsfunc: Callable[..., Any] | None = None,
) -> SenderCheck:
    """Whether `from_address` (the mail's one From address) is its sender's, by the Authentication-Results of
    `authserv_id` that the receiving server wrote above its own Received (its host: `receiving_hosts`, else the
    authserv-id; no headers are read when `authserv_id` is empty), else — with `verify_dkim` — by the mail's DKIM
    signature, verified here."""
    if "@" not in from_address:
        return SenderCheck(False, f"From {from_address!r} is no address")
    from_domain = _domain_of(from_address)
    verdict = SenderCheck(False, "no trusted_authserv_id")
    if authserv_id:
        above, why = receiving_side(header_fields(raw), receiving_hosts or (authserv_id,))
        if above is None:
            verdict = SenderCheck(False, f"no Authentication-Results from {authserv_id} believed: {why}")
        else:
            results, ignored = trusted_results(above, authserv_id)
            others = f" ({ignored} other ignored: another server's or unreadable)" if ignored else ""
            verdict = (
                check_results(results, from_domain, mode)
                if results
                else SenderCheck(False, f"no Authentication-Results from {authserv_id}{others}")
            )
    if verdict.verified or not verify_dkim:
        return verdict
    own = check_signature(raw, from_domain, mode, dnsfunc)
    return own if own.verified else SenderCheck(False, f"{verdict.reason}; {own.reason}")


__all__ = [
    "Alignment",
    "HeaderField",
    "Result",
    "SenderCheck",
    "aligned",
    "check_results",
    "check_sender",
    "check_signature",
    "header_fields",
    "organisational_domain",
    "received_by",
    "receiving_side",
    "trusted_results",
]
