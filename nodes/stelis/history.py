"""A thread's history as the model sees it, with Stelis anchors expanded at render time.

A thread's history is its ancestors' messages up to the point where each next thread in its lineage was
opened, then its own. An anchor (`stelis_anchor`) is rendered from the child thread's *current* row:
status, times, message count, chronicle, and the child's last 3 messages in full. Seen from the child
itself or any of its descendants it is one line, so a thread never contains itself recursively.
"""

from __future__ import annotations

from typing import TypeAlias

from memory import Repos
from memory.models import Message, Thread
from memory.repositories import TIMELINE_KINDS
from memory.repositories.messages import MessageLine

Shown: TypeAlias = "Message | MessageLine"  # a message as its history renders it (only its loaded columns are read)

ANCHOR_LAST_MESSAGES = 3


def timeline(
    repos: Repos, viewer_id: str, last: int | None = None, kinds=TIMELINE_KINDS, columns: tuple[str, ...] | None = None
) -> list[MessageLine]:
    """The viewer's history oldest first: its ancestors' messages up to each anchor, then its own. `columns`: only
    these of each message (a reader that needs only ids skips decoding the rest)."""
    lineage = repos.threads.lineage(viewer_id) or []
    if not lineage:
        return repos.messages.log_lines(viewer_id, kinds=kinds, last=last, columns=columns)
    parts: list[list[MessageLine]] = []
    remaining = last
    for index in range(len(lineage) - 1, -1, -1):
        thread = lineage[index]
        upto = None
        if index < len(lineage) - 1:
            anchor = repos.messages.anchor_for(lineage[index + 1].id)
            if anchor is None or anchor.thread_id != thread.id:
                break  # an anchor was lost: show nothing from before the child was opened
            upto = anchor.id
        rows = repos.messages.log_lines(thread.id, upto_id=upto, kinds=kinds, last=remaining, columns=columns)
        parts.append(rows)
        if remaining is not None:
            remaining -= len(rows)
            if remaining <= 0:
                break
    return [m for rows in reversed(parts) for m in rows]


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


def _when(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "?"


def render_anchor(repos: Repos, anchor: Shown, viewer_id: str, viewer_lineage: set[str], nested: bool = False) -> str:
    """Full expansion for outsiders; one line for the child itself, its descendants, and anchors
    quoted inside another anchor (so expansion never recurses)."""
    child_id = (anchor.meta or {}).get("child", "")
    child: Thread | None = repos.threads.get(child_id)
    label = child.label if child else (anchor.meta or {}).get("label", child_id)
    if child_id in viewer_lineage:
        inside = " — you are inside it" if child_id == viewer_id else ""
        return f'[Stelis thread "{label}" started ({child_id}){inside}]'
    if child is None:
        return f'[Stelis thread "{label}" ({child_id}): its record is missing]'
    if nested:
        return f'[Stelis thread "{label}" ({child.id}) — {child.status}]'
    count = repos.messages.count(child.id)
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
    last = repos.messages.log_lines(child.id, kinds=TIMELINE_KINDS, last=ANCHOR_LAST_MESSAGES)
    if last:
        lines.append(f"Its last {len(last)} message(s), in full:")
        lines += [render_item(repos, m, viewer_id, viewer_lineage, nested=True) for m in last]
    return "\n".join(lines)


def render_item(repos: Repos, message: Shown, viewer_id: str, viewer_lineage: set[str], nested: bool = False) -> str:
    if message.kind == "stelis_anchor":
        return render_anchor(repos, message, viewer_id, viewer_lineage, nested)
    return render_message(message)


def lineage_ids(repos: Repos, viewer_id: str) -> set[str]:
    return {t.id for t in repos.threads.lineage(viewer_id)} | {viewer_id}


def render_timeline(repos: Repos, viewer_id: str, last: int | None = None) -> list[str]:
    """The viewer's history as rendered items, oldest first (each item atomic: never cut)."""
    seen = lineage_ids(repos, viewer_id)
    return [render_item(repos, m, viewer_id, seen) for m in timeline(repos, viewer_id, last)]
