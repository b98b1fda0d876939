"""A thread's history as the model sees it, with Stelis anchors expanded at render time.

A thread's history is its ancestors' messages up to the point where each next thread in its lineage was
opened, then its own. An anchor (`stelis_anchor`) is rendered from the child thread's *current* row:
status, times, message count, chronicle, and the child's last 3 messages in full. Seen from the child
itself or any of its descendants it is one line, so a thread never contains itself recursively.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, TypeAlias

from managers.threads import ANCHOR_LAST_MESSAGES, MessageLine, ThreadManager

if TYPE_CHECKING:
    from memory.models import Message, Thread

Shown: TypeAlias = "Message | MessageLine"  # a message as its history renders it (only its loaded columns are read)

__all__ = ["ANCHOR_LAST_MESSAGES", "render_anchor", "render_item", "render_message", "render_timeline"]


def render_message(message: Shown) -> str:
    if message.kind == "step":
        node = (message.meta or {}).get("node", "step")
        return f"[{node}] {message.content.strip()}"
    extras = []
    if message.emotions:
        extras.append("emotions " + ", ".join(str(e).split(" (")[0] for e in message.emotions))
    if message.novelty_score is not None:
        extras.append(f"novelty {message.novelty_score:.0f}")
    if message.stagnation_flag:
        extras.append("STAGNANT: " + (message.stagnation_reason or ""))
    flagged = (message.meta or {}).get("self_error")
    if isinstance(flagged, dict):  # managers/thoughts.py
        extras.append("I flagged this as a reasoning error: " + str(flagged.get("reason") or ""))
    tail = f"  ({'; '.join(extras)})" if extras else ""
    return f"[tick {message.tick}] {message.content.strip()}{tail}"


def _when(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "?"


def render_anchor(
    threads: ThreadManager, anchor: Shown, viewer_id: str, viewer_lineage: set[str], nested: bool = False
) -> str:
    """Full expansion for outsiders; one line for the child itself, its descendants, and anchors
    quoted inside another anchor (so expansion never recurses)."""
    child_id = (anchor.meta or {}).get("child", "")
    child: Thread | None = threads.get(child_id)
    label = child.label if child else (anchor.meta or {}).get("label", child_id)
    if child_id in viewer_lineage:
        inside = " — you are inside it" if child_id == viewer_id else ""
        return f'[Stelis thread "{label}" started ({child_id}){inside}]'
    if child is None:
        return f'[Stelis thread "{label}" ({child_id}): its record is missing]'
    if nested:
        return f'[Stelis thread "{label}" ({child.id}) — {child.status}]'
    detail = threads.anchor_detail(child.id)
    count = detail.count
    lines = [f'[Stelis thread "{label}" ({child.id}) — {child.status}]']
    timing = f"started {_when(child.created_at)}"
    if child.status == "running":
        timing += f"; still running, {count} message(s) so far"
    else:
        timing += f"; {child.status} {_when(child.completed_at)}; {count} message(s)"
    lines.append(f"{timing}; depth {child.depth}, window ratio {child.window_ratio:g}")
    if child.status == "aborted" and child.error:
        lines.append(f"Aborted because: {child.error}")
    lines.append("Chronicle: " + (child.chronicle.strip() if child.chronicle else "(not written yet)"))
    last = detail.last
    if last:
        lines.append(f"Its last {len(last)} message(s), in full:")
        lines += [render_item(threads, m, viewer_id, viewer_lineage, nested=True) for m in last]
    return "\n".join(lines)


def render_item(
    threads: ThreadManager, message: Shown, viewer_id: str, viewer_lineage: set[str], nested: bool = False
) -> str:
    if message.kind == "stelis_anchor":
        return render_anchor(threads, message, viewer_id, viewer_lineage, nested)
    return render_message(message)


def render_timeline(threads: ThreadManager, viewer_id: str, last: int | None = None) -> list[str]:
    """The viewer's history as rendered items, oldest first (each item atomic: never cut); the history itself is
    `ThreadManager.timeline`'s."""
    seen = threads.lineage_ids(viewer_id)
    return [render_item(threads, m, viewer_id, seen) for m in threads.timeline(viewer_id, last)]
