"""Character cards (Tavern / SillyTavern): `chara_card_v2`, `chara_card_v3` or the flat v1 card, as JSON or inside
a PNG (base64 JSON in a `tEXt`/`iTXt`/`zTXt` chunk named `ccv3` or `chara`; `ccv3` wins). Read with the standard
library only; what a card holds becomes a persona's files (`card_files`)."""

from __future__ import annotations

import base64
import binascii
import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from persona.yaml_lines import parse_json

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_KEYWORDS = ("ccv3", "chara")  # in order of preference
MAX_CHUNK = 64 * 1024 * 1024
TEXT_FIELDS = (
    "name",
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "system_prompt",
    "creator_notes",
    "post_history_instructions",
    "creator",
)


class CardError(ValueError):
    pass


@dataclass
class Card:
    spec: str
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    system_prompt: str = ""
    creator_notes: str = ""
    post_history_instructions: str = ""
    creator: str = ""
    tags: list[str] = field(default_factory=list)
    alternate_greetings: list[str] = field(default_factory=list)


def is_png(raw: bytes) -> bool:
    return raw.startswith(PNG_SIGNATURE)


def png_text_chunks(raw: bytes) -> dict[str, str]:
    """The PNG's text chunks by keyword (the first of each); raises CardError on a broken PNG."""
    if not is_png(raw):
        raise CardError("not a PNG file")
    texts: dict[str, str] = {}
    at = len(PNG_SIGNATURE)
    while at + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[at : at + 8])
        if length > MAX_CHUNK or at + 12 + length > len(raw):
            raise CardError(f"broken PNG: chunk {kind!r} at byte {at} runs past the end of the file")
        data = raw[at + 8 : at + 8 + length]
        if zlib.crc32(kind + data) != struct.unpack(">I", raw[at + 8 + length : at + 12 + length])[0]:
            raise CardError(f"broken PNG: chunk {kind!r} at byte {at} fails its CRC check")
        at += 12 + length
        if kind == b"IEND":
            break
        try:
            if kind == b"tEXt":
                key, _, text = data.partition(b"\0")
                texts.setdefault(key.decode("latin-1"), text.decode("latin-1"))
            elif kind == b"zTXt":
                key, _, rest = data.partition(b"\0")
                texts.setdefault(key.decode("latin-1"), zlib.decompress(rest[1:]).decode("latin-1"))
            elif kind == b"iTXt":
                key, _, rest = data.partition(b"\0")
                compressed, rest = rest[0], rest[2:]
                _lang, _, rest = rest.partition(b"\0")
                _translated, _, text = rest.partition(b"\0")
                texts.setdefault(key.decode("latin-1"), (zlib.decompress(text) if compressed else text).decode("utf-8"))
        except (zlib.error, UnicodeDecodeError, IndexError) as exc:
            raise CardError(f"broken PNG: unreadable {kind.decode('latin-1')} chunk ({exc})") from None
    return texts


def _decode_payload(text: str) -> Any:
    stripped = text.strip()
    if stripped.startswith("{"):
        return parse_json(stripped)
    try:
        return parse_json(base64.b64decode(stripped, validate=False).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise CardError(f"the card in the PNG is not base64 JSON ({exc})") from None


def parse_card_data(data: Any) -> Card:
    if not isinstance(data, dict):
        raise CardError("a character card is a JSON object")
    spec = str(data.get("spec") or "chara_card_v1")
    if spec in ("chara_card_v2", "chara_card_v3"):
        body = data.get("data")
        if not isinstance(body, dict):
            raise CardError(f"{spec}: the card has no 'data' object")
    elif "spec" in data:
        raise CardError(f"unknown card spec {spec!r} (chara_card_v2 and chara_card_v3 are read)")
    else:
        body = data
    values = {}
    for key in TEXT_FIELDS:
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise CardError(f"{spec}: field '{key}' must be text")
        values[key] = (value or "").strip()
    if not values["name"]:
        raise CardError(f"{spec}: field 'name' is required")
    lists = {}
    for key in ("tags", "alternate_greetings"):
        value = body.get(key) or []
        lists[key] = [str(v) for v in value] if isinstance(value, list) else []
    return Card(
        spec=spec,
        name=values["name"],
        description=values["description"],
        personality=values["personality"],
        scenario=values["scenario"],
        first_mes=values["first_mes"],
        mes_example=values["mes_example"],
        system_prompt=values["system_prompt"],
        creator_notes=values["creator_notes"],
        post_history_instructions=values["post_history_instructions"],
        creator=values["creator"],
        tags=lists["tags"],
        alternate_greetings=lists["alternate_greetings"],
    )


def read_card(raw: bytes) -> Card:
    """A card from a PNG's bytes or a JSON file's."""
    if is_png(raw):
        chunks = png_text_chunks(raw)
        keyword = next((k for k in CARD_KEYWORDS if k in chunks), None)
        if keyword is None:
            raise CardError("the PNG holds no character card (no 'chara' or 'ccv3' text chunk)")
        try:
            return parse_card_data(_decode_payload(chunks[keyword]))
        except json.JSONDecodeError as exc:
            raise CardError(f"the card in the PNG's '{keyword}' chunk is not JSON: {exc}") from None
    try:
        return parse_card_data(parse_json(raw.decode("utf-8-sig")))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CardError(f"not a character card (neither PNG nor JSON): {exc}") from None


def _fill(text: str, name: str, user: str) -> str:
    for macro, value in (("{{char}}", name), ("<BOT>", name), ("{{user}}", user), ("<USER>", user)):
        text = text.replace(macro, value).replace(macro.upper(), value)
    return text.strip()


def card_files(card: Card, name: str, user: str = "my human") -> dict[str, str]:
    """IDENTITY.md (who: name, description), SOUL.md (how: personality, the card's system prompt),
    seed.txt (where the stream starts: scenario, first message)."""

    def fill(text: str) -> str:
        return _fill(text, name, user)

    identity = [f"# Identity\n\nI am {name}.", fill(card.description)]
    if card.tags:
        identity.append("Tags: " + ", ".join(card.tags))
    soul = ["# Soul", fill(card.personality) or f"- I am {name}; I think one step at a time."]
    if card.system_prompt:
        soul.append(fill(card.system_prompt))
    if card.mes_example:
        soul.append("## How I speak\n\n" + fill(card.mes_example))
    seed = [f"This is the notebook of {name}."]
    if card.scenario:
        seed.append(fill(card.scenario))
    if card.first_mes:
        seed.append(fill(card.first_mes))
    seed.append(f"{name}'s notebook, first entry:\n")
    return {
        "IDENTITY.md": "\n\n".join(p for p in identity if p) + "\n",
        "SOUL.md": "\n\n".join(p for p in soul if p) + "\n",
        "seed.txt": "\n\n".join(p for p in seed if p),
    }
