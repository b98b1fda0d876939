"""Parsing commands out of model output.

Accepts (a) the HMP block `# Commands:` [JSON list] `# End commands` (also `# Команды:` / `# Конец команд`),
(b) Epos `<tool_call>{"name": …, "arguments": {…}}</tool_call>` tags, (c) native tool calls of chat
models. Tolerates a missing end marker, trailing prose, a single object instead of a list, code fences
and slightly broken JSON (llm/json_output.py). Anything unparseable becomes an error string, never an
exception. Aliases (Epos `message`, `search`, …) come from the command specs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm.json_output import read_json
from nodes.commands.model import Command

BLOCK_START = re.compile(r"^[ \t]*#+[ \t]*(?:commands|команды)[ \t]*:?[ \t]*$", re.IGNORECASE | re.MULTILINE)
BLOCK_END = re.compile(r"^[ \t]*#+[ \t]*(?:end[ \t]+commands|конец[ \t]+команд)[ \t]*$", re.IGNORECASE | re.MULTILINE)
TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)

TYPE_KEYS = ("type", "name", "command", "cmd", "tool")
ARGS_KEYS = ("args", "arguments", "params", "parameters", "input")
RESERVED = {"cmd_id", "id", "description", *TYPE_KEYS, *ARGS_KEYS}


@dataclass
class ParseResult:
    commands: list[Command] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    body: str = ""  # the output without its commands block / tool calls


def normalise_type(raw: str, aliases: Mapping[str, str]) -> str:
    t = raw.strip().lower()
    if t in aliases:
        return aliases[t]
    if "." not in t:
        parts = t.split()
        if len(parts) >= 2:
            t = f"{parts[0]}.{parts[1]}"
        elif "/" in t:
            t = t.replace("/", ".", 1)
    return aliases.get(t, t)


def _loads_tolerant(text: str) -> tuple[Any, str | None]:
    """(value, note): the JSON of a block, and what was wrong with it (None when it read cleanly)."""
    reading = read_json(FENCE.sub("", text))
    if not reading.ok:
        return None, f"commands JSON: {reading.error}"
    if reading.value in ([], {}):
        return None, "empty commands JSON"
    return reading.value, "repaired malformed JSON" if reading.repaired else None


def _to_command(
    item: Any, default_id: str, syntax: str, aliases: Mapping[str, str]
) -> tuple[Command | None, str | None]:
    if not isinstance(item, dict):
        return None, f"command is not an object: {str(item)[:80]!r}"
    raw_type = next((value for k in TYPE_KEYS if isinstance(value := item.get(k), str) and value.strip()), None)
    if raw_type is None:
        return None, f"command without a type: {json.dumps(item)[:80]}"
    args = next((item[k] for k in ARGS_KEYS if k in item), None)
    if isinstance(args, str):  # "args": "responses=5" or a JSON string
        reading = read_json(args)
        args = (
            reading.value
            if reading.ok and isinstance(reading.value, dict)
            else dict(kv.split("=", 1) for kv in args.split() if "=" in kv) or {"text": args}
        )
    if args is None:
        args = {k: v for k, v in item.items() if k not in RESERVED}
    if not isinstance(args, dict):
        args = {"value": args}
    # HMP writes some arguments beside the block: {"type": "llm_task", "target_llm": "…", "args": {…}}
    args = {**{k: v for k, v in item.items() if k not in RESERVED and k not in args}, **args}
    cmd_id = item.get("cmd_id") or item.get("id")
    return Command(
        cmd_id=str(cmd_id) if cmd_id not in (None, "") else default_id,
        type=normalise_type(raw_type, aliases),
        args=args,
        description=str(item.get("description") or ""),
        syntax=syntax,
    ), None


def parse_commands(
    text: str,
    tick: int,
    native_tool_calls: list[dict[str, Any]] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> ParseResult:
    result = ParseResult(body=text or "")
    raw_items: list[tuple[Any, str]] = []

    start = BLOCK_START.search(text or "")
    if start:
        end = BLOCK_END.search(text, start.end())
        block = text[start.end() : end.start() if end else len(text)]
        result.body = (text[: start.start()] + (text[end.end() :] if end else "")).strip()
        if not end:
            result.errors.append("commands block has no end marker; read to the end of the output")
        value, note = _loads_tolerant(block)
        if note and value is None:
            result.errors.append(note)
        elif note:
            result.errors.append(note)
        if isinstance(value, dict):
            value = [value]
        if isinstance(value, list):
            raw_items += [(item, "hmp") for item in value]

    for match in TOOL_CALL.finditer(result.body):
        value, note = _loads_tolerant(match.group(1))
        if value is None:
            result.errors.append(f"tool_call: {note}")
            continue
        if note:
            result.errors.append(f"tool_call: {note}")
        for item in value if isinstance(value, list) else [value]:
            raw_items.append((item, "tool_call"))
    result.body = TOOL_CALL.sub("", result.body).strip()

    for call in native_tool_calls or []:
        raw_items.append(
            ({"type": call.get("name", ""), "args": call.get("args") or {}, "cmd_id": call.get("id")}, "native")
        )

    seen: dict[str, int] = {}
    for position, (item, syntax) in enumerate(raw_items, start=1):
        command, error = _to_command(item, f"t{tick}-{position}", syntax, aliases or {})
        if error:
            result.errors.append(error)
            continue
        assert command is not None
        if command.cmd_id in seen:  # the same id twice in one output: keep both, distinctly
            seen[command.cmd_id] += 1
            command.cmd_id = f"{command.cmd_id}#{seen[command.cmd_id]}"
        else:
            seen[command.cmd_id] = 1
        result.commands.append(command)
    return result
