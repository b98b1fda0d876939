"""Anti-stagnation escalation (HMP "Механизмы разрыва цикла"): when reflex-lite did not help.

Diagnose the source, then apply the matching mechanisms cheapest first; each further stagnant tick adds
the next one (a combination). Their effects live in the tick state's `stagnation` episode, so they survive
a restart and end together when novelty recovers:
- `stimulus` lines shown in the next prompt (flashback, knowledge base), `instruction` put before the
  thinking instruction (meta-analysis; reflex-lite's rephrased request is `rephrased`);
- `context_mode` overriding the thread's (change of context), `llm` preferred by call_llm (switch LLM),
  `pause_s` taken by execute_commands (radical pause); ask-the-human sends one message per episode.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Callable

from memory import Repos
from memory.text import emotion_strengths
from nodes.commands.cycle import context_cycle, context_mode
from nodes.reflexes.prompts import ASK_HUMAN_TEXT, FLASHBACK_LINE, KB_LINE, META_ANALYSIS_INSTRUCTION
from nodes.state import TickState

log = logging.getLogger(__name__)

# mechanism -> (class, relative cost)
MECHANISMS: dict[str, tuple[str, int]] = {
    "read_kb": ("external", 1), "ask_human": ("external", 2),
    "change_context": ("context", 2),
    "flashback": ("internal", 1), "meta_analysis": ("internal", 1), "switch_llm": ("internal", 3),
    "pause": ("radical", 4),
}
DIAGNOSIS_CLASS = {"no_new_data": "external", "monotone_context": "context", "repeated_thoughts": "internal",
                   "overload": "radical"}
FATIGUE = {"fatigue", "tiredness", "exhaustion", "overwhelm", "apathy"}  # strong (≥ 4): overload
NO_DATA_TICKS = 5  # no note from outside during this many ticks: "no new data"
FLASHBACK_TIERS = ("diary", "message", "concept", "llm_memory", "episode", "insight", "abstract")


def plan(diagnosis: str) -> list[str]:
    """The diagnosis's own class first, then the others, each cheapest first; the pause comes last unless
    the diagnosis is overload."""
    own = DIAGNOSIS_CLASS[diagnosis]
    order = sorted(MECHANISMS, key=lambda m: (MECHANISMS[m][0] != own, MECHANISMS[m][1], m))
    if own != "radical":
        order.remove("pause")
        order.append("pause")
    return order


def diagnose(repos: Repos, state: TickState, episode: dict[str, Any], recalled: list[int]) -> str:
    report = state.context_report
    budget = report.get("budget_tokens") or 0
    tired = max((s for n, s in emotion_strengths(state.emotions) if n in FATIGUE), default=0)
    if (budget and state.prompt_tokens >= 0.9 * budget) or tired >= 4:
        return "overload"
    ticks = repos.ticks.recent(NO_DATA_TICKS, thread_id=state.thread_id)
    latest_note = repos.notes.latest_incoming_at()
    window_start = min((t.started_at for t in ticks), default=None)
    if latest_note is None or (window_start is not None and _naive(latest_note) < _naive(window_start)):
        return "no_new_data"
    if sorted(recalled) == sorted(episode.get("recalled_before") or []):
        return "monotone_context"
    return "repeated_thoughts"


def _naive(value: datetime) -> datetime:
    return value.replace(tzinfo=None) if value.tzinfo else value


class Escalation:
    """Applies mechanisms for one stagnant tick; `emit` sends stream events (the CLI shows messages)."""

    def __init__(self, svc, repos: Repos, state: TickState, thought: str, emit: Callable[[dict], None]):
        self.svc, self.repos, self.state, self.thought, self.emit = svc, repos, state, thought, emit

    def applicable(self, mechanism: str, episode: dict[str, Any]) -> bool:
        if mechanism == "read_kb":
            return bool(self.repos.items.sample(["kb"], 1))
        if mechanism == "switch_llm":
            return self._other_llm() is not None
        if mechanism == "flashback":
            return bool(self.repos.items.sample(FLASHBACK_TIERS, 1))
        return True

    def run(self, episode: dict[str, Any], level: int) -> dict[str, Any]:
        """Apply the first `level` applicable mechanisms of the diagnosis's plan; returns the new episode."""
        recalled = list(self.state.context_report.get("recalled") or [])
        diagnosis = episode.get("diagnosis") or diagnose(self.repos, self.state, episode, recalled)
        chosen: list[str] = []
        for mechanism in plan(diagnosis):
            if len(chosen) >= level:
                break
            if self.applicable(mechanism, episode):
                chosen.append(mechanism)
        episode = {**episode, "diagnosis": diagnosis, "mechanisms": chosen, "stimulus": [], "recalled_before": recalled}
        for mechanism in chosen:
            getattr(self, mechanism)(episode)
        self.repos.processes.add("anti_stagnation", f"stagnant {episode.get('streak')} ticks; diagnosis {diagnosis}; "
                                 f"applying {', '.join(chosen) or 'nothing applicable'}", status="close",
                                 thread_id=self.state.thread_id)
        return episode

    def _distant(self, items: list[Any]) -> Any:
        """The item farthest in meaning from the looping thought (the first one when embeddings are off)."""
        memory = self.svc.memory
        if memory is None or len(items) < 2:
            return items[0]
        try:
            vectors = memory.embed_texts([self.thought] + [i.text for i in items])
        except Exception:
            log.exception("flashback: embeddings unavailable; taking a random memory")
            return items[0]
        scores = vectors[1:] @ vectors[0]
        return items[int(scores.argmin())]

    def flashback(self, episode: dict[str, Any]) -> None:
        recent = {m.content for m in self.repos.messages.recent(self.state.thread_id, 20)}
        items = [i for i in self.repos.items.sample(FLASHBACK_TIERS, 40) if i.text not in recent] or \
            self.repos.items.sample(FLASHBACK_TIERS, 40)
        item = self._distant(items)
        when = f"{item.created_at:%Y-%m-%d}" if item.created_at else "earlier"
        episode["stimulus"].append(FLASHBACK_LINE.format(tier=item.tier, when=when, text=item.text[:600]))
        episode["flashback_item"] = item.id

    def read_kb(self, episode: dict[str, Any]) -> None:
        item = self._distant(self.repos.items.sample(["kb"], 20))
        episode["stimulus"].append(KB_LINE.format(title=item.title or "a document", text=item.text[:800]))
        episode["kb_item"] = item.id

    def ask_human(self, episode: dict[str, Any]) -> None:
        if episode.get("asked_human"):
            return
        topic = " ".join(self.thought.split()[:12])
        text = ASK_HUMAN_TEXT.format(topic=topic)
        note = self.repos.notes.add(text, source="llm", thread_id=self.state.thread_id,
                                    llm_id=self.state.llm.get("llm_id"), read=True,
                                    tags=["outgoing", "to:user", "anti_stagnation"])
        episode["asked_human"] = note.id
        self.emit({"event": "message", "to": "user", "text": text, "note_id": note.id, "tick": self.state.tick})

    def meta_analysis(self, episode: dict[str, Any]) -> None:
        episode["instruction"] = META_ANALYSIS_INSTRUCTION

    def change_context(self, episode: dict[str, Any]) -> None:
        current = context_mode(context_cycle(self.repos, self.svc.settings, self.state.thread_id))
        episode["context_mode"] = "meditation" if current != "meditation" else "standard"

    def _other_llm(self) -> str | None:
        author = self.state.llm.get("llm_id")
        return next((i for i in self.svc.llms.order(author) if i != author), None)

    def switch_llm(self, episode: dict[str, Any]) -> None:
        episode["llm"] = self._other_llm()

    def pause(self, episode: dict[str, Any]) -> None:
        episode["pause_s"] = float(self.svc.settings.reflexes.stagnation_pause_s)
