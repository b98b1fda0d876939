"""YAML read with the line of every field, so an error can name file, line and field.

    config.yaml:27 memory.recall_k: Input should be greater than or equal to 0

Used for the persona's config.yaml (persona/settings.py), ethics.yaml, skills' frontmatter, channels' secrets files
and playbooks (graph/playbook/). Every YAML the project reads goes through `parse_yaml` (or `parse_lined_yaml`, which
also wants a mapping), so every shape a YAML parser accepts but a settings object cannot take is one YamlError naming
file, line and field, never an exception from deeper down: a key that is not a string (`1: 2`, `? a` without a
value is fine but `?` alone is a null key), an alias inside its own anchor (a loop), aliases expanding past a bound
(the "billion laughs"), nesting past a bound, a tag the safe loader refuses or a value its tag cannot take
(`!!int abc`). `parse_json` gives JSON the same guarantee (nesting, huge numbers).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_NODES = 100_000  # values a document may hold once its aliases are expanded; a playbook holds a few thousand
MAX_DEPTH = 100  # nesting; settings nest five deep, playbooks about ten

MERGE = "tag:yaml.org,2002:merge"  # `<<: *defaults` merges a mapping into the one holding it
_STRING_KEYS = ("tag:yaml.org,2002:str", MERGE)
_SURROGATE = re.compile("[\ud800-\udfff]")  # "\ud800" in a double-quoted scalar: no UTF-8 can hold it
YamlPath = tuple[str | int, ...]  # a field's keys and list indexes from the top: ("llms", 0, "id")


class YamlError(ValueError):
    """The text is not YAML, or not a mapping; the message names the file and line."""


class UnreadableFile(ValueError):
    """A file that cannot be read, or is not UTF-8 text; the message names it."""


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(
            f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot read it ({exc.strerror})") from None


@dataclass
class LinedYaml:
    data: dict[str, Any]
    source: str
    lines: dict[YamlPath, int] = field(default_factory=dict)

    def line_of(self, path: YamlPath) -> int:
        """The line of the deepest known prefix of `path` (1 when nothing matches)."""
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def where(self, path: YamlPath) -> str:
        return f"{Path(self.source).name}:{self.line_of(path)} {format_path(path)}"


class _Loader(yaml.SafeLoader):
    """The safe loader, whose value errors name their node: `!!int abc`, `!!bool maybe` and a 5,000-digit integer
    raise ValueError or KeyError from inside PyYAML's constructors, without a line."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, KeyError, TypeError, OverflowError) as exc:
            shown = _shown(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            tag = node.tag.removeprefix("tag:yaml.org,2002:")
            why = str(exc).split(";")[0]  # a long integer's message goes on to how to lift the limit
            raise yaml.constructor.ConstructorError(
                None, None, f"{shown} cannot be read as !!{tag} ({why})", node.start_mark
            ) from None


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:30]!r}… ({len(text):,} characters)"


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    tag = node.tag.removeprefix("tag:yaml.org,2002:")
    return f"{tag} {_shown(node.value)}" if node.value else tag


def _line_map(tree: yaml.Node, name: str, first_line: int = 1) -> dict[YamlPath, int]:
    """Every field's line (a merged mapping's fields too) — and the refusals that need the node tree: a key that is
    not a string, an alias loop, aliases expanding past MAX_NODES, nesting past MAX_DEPTH, text no UTF-8 can hold
    (each YamlError naming line and field). The walk expands aliases, so it stops after MAX_NODES values whatever
    the document."""
    lines: dict[YamlPath, int] = {}
    visited = 0
    holding: set[int] = set()  # the nodes on the current path: an alias to one of them is a loop

    def refuse(node: yaml.Node, path: YamlPath, why: str) -> YamlError:
        return YamlError(f"{name}:{node.start_mark.line + first_line} {format_path(path)}: {why}")

    def walk(node: yaml.Node, path: YamlPath, merged: bool = False, key: yaml.Node | None = None) -> None:
        nonlocal visited
        visited += 1
        if visited > MAX_NODES:
            raise refuse(node, path, f"more than {MAX_NODES:,} values once its aliases are expanded (an alias bomb?)")
        if len(path) > MAX_DEPTH:
            raise refuse(node, path, f"nested deeper than {MAX_DEPTH} levels")
        if id(node) in holding:
            raise refuse(key or node, path, "an alias inside the value it names (a loop)")  # the alias's key line
        line = node.start_mark.line + first_line
        if merged:  # a key of the mapping itself wins over a merged one
            lines.setdefault(path, line)
        else:
            lines[path] = line  # a field's line is its value's
        if isinstance(node, yaml.ScalarNode):
            if _SURROGATE.search(node.value):
                raise refuse(node, path, "a lone surrogate escape (\\ud800-\\udfff) is not text")
            return
        holding.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag not in _STRING_KEYS:
                    raise refuse(key, path, f"a key must be a string, not {_kind(key)} (quote it)")
                if _SURROGATE.search(key.value):
                    raise refuse(key, path, "a lone surrogate escape (\\ud800-\\udfff) is not text")
                if key.tag == MERGE:
                    for each in value.value if isinstance(value, yaml.SequenceNode) else [value]:
                        walk(each, path, merged=True)  # the constructor refuses what is not a mapping
                else:
                    walk(value, path + (key.value,), merged, key)
        else:
            for index, item in enumerate(node.value):
                walk(item, path + (index,), merged)
        holding.discard(id(node))

    walk(tree, ())
    return lines


def format_path(path: YamlPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _yaml_error(name: str, exc: yaml.YAMLError, first_line: int) -> YamlError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = mark.line + first_line if mark else first_line
    return YamlError(f"{name}:{line} (yaml): {getattr(exc, 'problem', None) or exc}")


def _too_deep_flow(text: str) -> int | None:
    """The line where `[`/`{` nest deeper than MAX_DEPTH, if they do — found before PyYAML sees the text: its scanner
    takes time quadratic in that depth (5,000 brackets: seconds), and libyaml's composer overflows the C stack.
    Brackets inside quoted scalars and comments do not count; a quote opens one only where a token can start."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:  # nearly every file: no walk at all
        return None
    depth, line, quote, previous = 0, 1, "", " "
    index, end = 0, len(text)
    while index < end:
        char = text[index]
        if char == "\n":
            line += 1
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"" and previous in " \t\n[{,:-?":
            quote = char
        elif char == "#" and previous in " \t\n":
            newline = text.find("\n", index)
            index = end if newline < 0 else newline
            continue
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line
        elif char in "]}":
            depth = max(0, depth - 1)
        previous = char
        index += 1
    return None


def _parse(text: str, name: str, first_line: int) -> tuple[yaml.Node | None, Any, dict[YamlPath, int]]:
    if (deep := _too_deep_flow(text)) is not None:
        raise YamlError(f"{name}:{deep + first_line - 1} (yaml): nested deeper than {MAX_DEPTH} levels")
    try:
        tree = yaml.compose(text, Loader=_Loader)
        if tree is None:
            return None, None, {}
        lines = _line_map(tree, name, first_line)
        loader = _Loader("")
        try:
            data = loader.construct_document(tree)  # composing passes what constructing refuses (a bare `=`)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise _yaml_error(name, exc, first_line) from None
    except RecursionError:  # PyYAML composes recursively: thousands of `[`
        raise YamlError(f"{name}:{first_line} (yaml): nested deeper than {MAX_DEPTH} levels") from None
    return tree, data, lines


def parse_yaml(text: str, source: str = "<yaml>", *, first_line: int = 1) -> Any:
    """Any YAML document (None when empty), under the module doc's guarantees; `first_line` is the line `text`
    starts on in its file (a frontmatter's). Raises YamlError."""
    return _parse(text, Path(source).name, first_line)[1]


def parse_lined_yaml(text: str, source: str = "<yaml>", *, empty_ok: bool = False) -> LinedYaml:
    name = Path(source).name
    tree, data, lines = _parse(text, name, 1)
    if tree is None:
        if empty_ok:
            return LinedYaml({}, source)
        raise YamlError(f"{name}:1 (top level): empty file")
    if not isinstance(data, dict):
        raise YamlError(f"{name}:1 (top level): expected a mapping, got {type(data).__name__}")
    return LinedYaml(data, source, lines)


def parse_json(text: str) -> Any:
    """json.loads, whose every refusal is a JSONDecodeError: nesting past the interpreter's recursion limit raises
    RecursionError there, an integer of more than 4,300 digits a bare ValueError, and a lone surrogate escape
    ("\\ud800") is decoded into a string no file or database can hold."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None
    except ValueError as exc:
        raise json.JSONDecodeError(str(exc).split(";")[0], text, 0) from None
    pending = [data]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            pending += value
        elif isinstance(value, str) and _SURROGATE.search(value):
            raise json.JSONDecodeError("a lone surrogate escape (\\ud800-\\udfff) is not text", text, 0)
    return data


def read_lined_yaml(path: str | Path, *, missing_ok: bool = True) -> LinedYaml:
    path = Path(path)
    if not path.exists():
        if missing_ok:
            return LinedYaml({}, str(path))
        raise YamlError(f"{path}: no such file")
    try:
        text = read_text(path)
    except UnreadableFile as exc:
        raise YamlError(str(exc)) from None
    return parse_lined_yaml(text, str(path), empty_ok=True)
