"""Is a mail's From the sender's? The receiving server's verdict, read as a careful mail client reads it.

A mail's From header is whatever its sender typed, so it names nobody by itself. The server that received the mail
checked DKIM signatures and SPF and wrote what it found in an `Authentication-Results` header (RFC 8601); this module
believes only the headers whose authserv-id is the one the operator named for the channel (`trusted_authserv_id`)
— a sender can add headers of their own under any other name, and a receiving server removes the ones that arrive
under its own (RFC 8601 §5) — and accepts the From address only when, in those headers,
- DKIM passed for a signing domain (`header.d`) aligned with the From domain, or
- SPF passed for an envelope sender (`smtp.mailfrom`) whose domain is aligned with it,
where aligned is DMARC's (RFC 7489 §3.1): `relaxed` — the same organisational domain (the Public Suffix List's
registrable domain: `mail.example.org` and `example.org` are aligned, `example.co.uk` and `other.co.uk` are not) —
or `strict`, the same domain. Anything else — no such header, a failure, a pass for another domain, two From
addresses — leaves the sender unverified, and says why.

Libraries: `authres` parses the header (RFC 8601 and its extensions: quoted values, comments, `none`), the parser
of the dkimpy / authheaders family; `publicsuffixlist` gives the organisational domain from the list it ships
(nothing is fetched at run time); dkimpy verifies a signature itself (`verify_dkim`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import getaddresses
from functools import lru_cache
from typing import Any, Literal

Alignment = Literal["relaxed", "strict"]


@dataclass(frozen=True)
class SenderCheck:
    verified: bool
    reason: str  # why not (empty when verified), or what verified it ("dkim=pass header.d=example.org")


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


def trusted_results(headers: Sequence[str], authserv_id: str) -> tuple[list[Result], int]:
    """The results in the headers written by `authserv_id` (case-insensitive), and how many headers were passed
    over (another authserv-id, or unreadable)."""
    from authres import AuthenticationResultsHeader

    wanted = authserv_id.strip().lower()
    results: list[Result] = []
    ignored = 0
    for value in headers:
        try:
            header = AuthenticationResultsHeader.parse(f"Authentication-Results: {' '.join(str(value).split())}")
        except Exception:  # noqa: BLE001 - authres raises several kinds for a malformed header: it counts as absent
            ignored += 1
            continue
        if str(header.authserv_id or "").strip().lower() != wanted:
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


def check_signature(raw: bytes, from_domain: str, mode: Alignment = "relaxed",
                    dnsfunc: Callable[..., Any] | None = None) -> SenderCheck:
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


def check_sender(mail: EmailMessage, authserv_id: str, mode: Alignment = "relaxed", *, raw: bytes | None = None,
                 dnsfunc: Callable[..., Any] | None = None) -> SenderCheck:
    """Whether `mail`'s From is its sender's, by the Authentication-Results headers of `authserv_id` (none when
    empty), else — given its `raw` bytes — by its DKIM signature, verified here."""
    addresses = [address for _, address in getaddresses([str(v) for v in mail.get_all("From", [])]) if address]
    if len(addresses) != 1 or "@" not in addresses[0]:
        return SenderCheck(False, f"{len(addresses)} From addresses: one is needed")
    from_domain = _domain_of(addresses[0])
    verdict = SenderCheck(False, "no trusted_authserv_id")
    if authserv_id:
        headers = [str(v) for v in mail.get_all("Authentication-Results", [])]
        results, ignored = trusted_results(headers, authserv_id)
        others = f" ({ignored} other ignored: another server's or unreadable)" if ignored else ""
        verdict = check_results(results, from_domain, mode) if results else \
            SenderCheck(False, f"no Authentication-Results from {authserv_id}{others}")
    if verdict.verified or raw is None:
        return verdict
    own = check_signature(raw, from_domain, mode, dnsfunc)
    return own if own.verified else SenderCheck(False, f"{verdict.reason}; {own.reason}")


__all__ = ["Alignment", "Result", "SenderCheck", "aligned", "check_results", "check_sender", "check_signature", "organisational_domain",
           "trusted_results"]
