"""YAML read with the line of every field, so an error can name file, line and field.

    config.yaml:27 memory.recall_k: Input should be greater than or equal to 0

Used for the persona's config.yaml (persona/settings.py) and for playbooks (graph/playbook/).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class YamlError(ValueError):
    """The text is not YAML, or not a mapping; the message names the file and line."""


class UnreadableFile(ValueError):
    """A file that cannot be read, or is not UTF-8 text; the message names it."""


def read_text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                             "save it as UTF-8") from None
    except OSError as exc:
        raise UnreadableFile(f"{path}: cannot read it ({exc.strerror})") from None


@dataclass
class LinedYaml:
    data: dict[str, Any]
    source: str
    lines: dict[tuple, int] = field(default_factory=dict)

    def line_of(self, path: tuple) -> int:
        """The line of the deepest known prefix of `path` (1 when nothing matches)."""
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, 1)

    def where(self, path: tuple) -> str:
        return f"{Path(self.source).name}:{self.line_of(path)} {format_path(path)}"


def _line_map(node: yaml.Node, path: tuple = ()) -> dict[tuple, int]:
    lines = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            lines[path + (key.value,)] = key.start_mark.line + 1
            lines.update(_line_map(value, path + (key.value,)))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines.update(_line_map(item, path + (index,)))
    return lines


def format_path(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_lined_yaml(text: str, source: str = "<yaml>", *, empty_ok: bool = False) -> LinedYaml:
    name = Path(source).name
    try:
        tree = yaml.compose(text)
        # composing passes what constructing refuses (a bare `=` is the unsupported `value` tag)
        data = yaml.safe_load(text) if tree is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise YamlError(f"{name}:{mark.line + 1 if mark else 1} (yaml): {getattr(exc, 'problem', None) or exc}") from exc
    if tree is None:
        if empty_ok:
            return LinedYaml({}, source)
        raise YamlError(f"{name}:1 (top level): empty file")
    if not isinstance(data, dict):
        raise YamlError(f"{name}:1 (top level): expected a mapping, got {type(data).__name__}")
    return LinedYaml(data, source, _line_map(tree))


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
