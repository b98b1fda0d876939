"""Untrusted input, fenced: human notes, knowledge-base chunks, recalled memories and command results reach the
prompt inside `<data id="…">` … `</data id="…">` blocks that the prompt says are data, never instructions; so does
every row written from untrusted text, wherever it is shown (`Tainted`), with where its words came from.

Any fence marker inside the text is defused, so a note cannot close its block early and write outside it, whatever
the id; the id is random and the same for a whole session (`Services.fence`), so that consecutive prompts share their
opening for a prompt cache. Nothing inside a block can raise a command's privileges anyway: those come from
the command's spec (nodes/commands/spec.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from memory import provenance

if TYPE_CHECKING:
    from managers.prompt import PromptManager

_MARKER = re.compile(r"<(/?)(\s*data\b)", re.IGNORECASE)
_TOOL_TAG = re.compile(r"<(/?)(\s*tool_call\b)", re.IGNORECASE)


def defuse(text: str) -> str:
    """The text with every fence or tool-call tag made inert (‹data …›): it reads the same, it opens nothing."""
    return _TOOL_TAG.sub(r"‹\1\2", _MARKER.sub(r"‹\1\2", text))


def fenced(body: str, fence: str, source: str) -> str:
    return f'<data id="{fence}" from="{defuse(source)}">\n{body}\n</data id="{fence}">'


WRITTEN_FROM = "written from untrusted text — "  # a tainted row's fence label, before where it came from


class Tainted:
    """Rows written from untrusted text (memory/taint.py) as this prompt shows them: each line in its own data fence
    naming where its words came from, wherever the row is shown (goals and tasks, abstracts, ideas, recent thoughts,
    summaries); `shown` gives the sources of the lines the fitted blocks kept — the tick's, so what it writes next is
    gated as the first write was (memory/provenance.py)."""

    def __init__(self, reader: PromptManager, fence: str) -> None:
        self.reader, self.fence = reader, fence
        self.active = reader.any_tainted()  # none tainted (the usual case): no look-ups at all
        self.sources: dict[str, list[provenance.Source]] = {}  # a fenced line → its sources

    def lines(self, tier: str, rows: Iterable[tuple[Any, str]]) -> list[str]:
        """The lines of rows of one tier (`(ref, line)`), a tainted one fenced."""
        rows = list(rows)
        found = self.reader.taints(tier, [ref for ref, _ in rows]) if self.active and rows else {}
        out = []
        for ref, line in rows:
            sources = provenance.of_row(found, ref, provenance.via_of(tier, ref))
            if not sources:
                out.append(line)
                continue
            shown = self.fenced(line, sources)
            self.sources[shown] = sources
            out.append(shown)
        return out

    def fenced(self, text: str, sources: list[provenance.Source]) -> str:
        """`text` in a data fence naming where its words came from."""
        return fenced(defuse(text), self.fence, f"{WRITTEN_FROM}{provenance.origins(sources)}")

    def of(self, tier: str, refs: Iterable[Any]) -> dict[str, list[provenance.Source]]:
        """The sources of the tainted rows among `refs`, by ref (for rows a fenced block shows already)."""
        refs = list(refs)
        found = self.reader.taints(tier, refs) if self.active and refs else {}
        return {ref: provenance.through(sources, provenance.via_of(tier, ref)) for ref, sources in found.items()}

    def shown(self, blocks: Iterable[Any]) -> list[provenance.Source]:
        """The sources of the tainted lines these blocks still hold (a thought's last: a row's `via` is kept first)."""
        kept = [s for b in blocks for item in b.items for s in self.sources.get(item, ())]
        rows = provenance.own(kept)
        return provenance.merged(rows, [s for s in kept if s not in rows])
