"""Anti-stagnation escalation (HMP "Механизмы разрыва цикла"): when reflex-lite did not help.

Diagnose the source, then apply the matching mechanisms cheapest first; each further stagnant tick adds
the next one (a combination). The mechanisms are rows of `stagnation_strategies` (the built-in ones,
managers/strategies.py, are seeded; the persona adds its own micro-scenarios and archives what it does not want,
nodes/commands/strategies.py);
within a class and cost, the one that more often brought novelty back goes first (a mechanism is counted as used
once per episode, and as having helped when novelty came back right after it was added; the order is fixed when
an episode starts). Their effects live in the tick
state's `stagnation` episode, so they survive a restart and end together when novelty recovers:
- `stimulus` lines shown in the next prompt, fenced as data (flashback, knowledge base, world check: a fresh feed
  item, interest memory: a topic left alone for long), `instruction` lines put before the thinking instruction
  (meta-analysis, rationale reflex, goal reformulation, task switch, random iteration: a thinking method drawn
  at random, the persona's own strategies; reflex-lite's rephrased request is `rephrased`);
- `context_mode` overriding the thread's (change of context), `llm` preferred by call_llm (switch LLM),
  `pause_s` taken by execute_commands (radical pause); ask-the-human sends one message per episode;
- ask the mesh (HMP "Mesh-запрос: расскажи что-нибудь новое", external, cheap): once an episode the most trusted
  peers (`reflexes.mesh_ask_peers`) are asked what they would explore now — each `mesh.ask` goes through the consent
  model (a pending approval, or sent at once when `consent.auto_approve` names mesh.ask); the answers arrive as
  notes from peers (data). With the mesh off or no peer known it says so in the stimulus, and the next mechanism
  takes its place;
- move the task to a simulated environment (HMP "Перенос задачи в … симулированную среду", context, costly): the
  open task in front is rehearsed in a Stelis child thread of origin `simulation`; the ticks run there, its
  prompt says it is a rehearsal, commands that would reach outside or change the persona are simulated, not run
  (execute_commands), and after `reflexes.simulation_ticks` thoughts the thread closes and its chronicle returns to
  the parent through its anchor.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import i18n
from managers import Managers
from managers.loop import context_mode
from managers.owners import process_token
from managers.strategies import MECHANISMS, EscalationFacts
from managers.threads import DEFAULT_WINDOW_RATIO, StelisRefused
from managers.threads import SIMULATION as SIMULATION  # the rehearsal's origin, as the prompt's step reads it here
from memory import provenance
from memory.note_kinds import Door
from memory.text import emotion_strengths
from nodes.context import CYCLE, Services
from nodes.reflexes.prompts import (
    ASK_HUMAN_TEXT,
    FLASHBACK_LINE,
    GOAL_REFORMULATION_INSTRUCTION,
    INTEREST_LINE,
    KB_LINE,
    MESH_ASKED_LINE,
    MESH_NONE_LINE,
    MESH_QUESTION,
    META_ANALYSIS_INSTRUCTION,
    RANDOM_ITERATION_INSTRUCTION,
    RATIONALE_INSTRUCTION,
    SIMULATION_CHRONICLE,
    SIMULATION_LINE,
    SIMULATION_REFUSED_LINE,
    TASK_SWITCH_INSTRUCTION,
    WORLD_ASKED_LINE,
    WORLD_LINE,
    WORLD_NOTHING_LINE,
)
from nodes.state import StagnationEpisode, TickState
from nodes.stelis.threads import child_thread_id


def _came_from(episode: StagnationEpisode, source: provenance.Source | None) -> None:
    """The stimulus holds untrusted text: say where from (the tick that shows it reads `stimulus_sources`)."""
    if source is not None:
        episode["stimulus_sources"] = provenance.merged(episode.get("stimulus_sources"), [source])


log = logging.getLogger(__name__)

INTEREST_RECENT = 30  # recent thoughts a "forgotten" topic must not appear in
DIAGNOSIS_CLASS = {
    "no_new_data": "external",
    "monotone_context": "context",
    "repeated_thoughts": "internal",
    "overload": "radical",
}
FATIGUE = {"fatigue", "tiredness", "exhaustion", "overwhelm", "apathy"}  # strong (≥ 4): overload
NO_DATA_TICKS = 5  # no note from outside during this many ticks: "no new data"
FLASHBACK_TIERS = ("diary", "message", "concept", "llm_memory", "episode", "insight", "abstract")


def plan(
    diagnosis: str,
    strategies: list[tuple[str, str, int, int, int]] | None = None,
    ratings: dict[str, float] | None = None,
) -> list[str]:
    """The diagnosis's own class first, then the others; within them cheapest first, then the persona's own rating
    (`ratings.add {"subject": "strategy:<name>"}`, −5..+5), then the one that helped most often (uses and
    successes as (helped + 1) / (uses + 2)); the pause comes last unless the diagnosis is overload. `strategies`:
    (name, class, cost, uses, helped) rows; default the built-in mechanisms, unused."""
    own = DIAGNOSIS_CLASS[diagnosis]
    rows = strategies if strategies is not None else [(n, c, cost, 0, 0) for n, (c, cost) in MECHANISMS.items()]
    rated = ratings or {}
    order = [
        r[0]
        for r in sorted(rows, key=lambda r: (r[1] != own, r[2], -rated.get(r[0], 0.0), -(r[4] + 1) / (r[3] + 2), r[0]))
    ]
    if own != "radical" and "pause" in order:
        order.remove("pause")
        order.append("pause")
    return order


def diagnose(house: Managers, state: TickState, episode: StagnationEpisode, recalled: list[int]) -> str:
    report = state.context_report
    budget = report.get("budget_tokens") or 0
    tired = max((s for n, s in emotion_strengths(state.emotions) if n in FATIGUE), default=0)
    if (budget and state.prompt_tokens >= 0.9 * budget) or tired >= 4:
        return "overload"
    if house.thinking.nothing_new_since(state.thread_id, NO_DATA_TICKS):
        return "no_new_data"
    if sorted(recalled) == sorted(episode.get("recalled_before") or []):
        return "monotone_context"
    return "repeated_thoughts"


class Escalation:
    """Applies mechanisms for one stagnant tick; `emit` sends stream events (the CLI shows messages)."""

    _forgotten: tuple[str, int] | None  # set once asked (None is an answer: every topic is recent)
    _read_facts: EscalationFacts | None = None

    def __init__(
        self,
        services: Services,
        house: Managers,
        state: TickState,
        thought: str,
        emit: Callable[[dict[str, Any]], None],
    ) -> None:
        self.services, self.house, self.state, self.thought, self.emit = services, house, state, thought, emit

    def applicable(self, mechanism: str, episode: StagnationEpisode) -> bool:
        facts = self._facts()
        if mechanism == "read_kb":
            return facts.kb
        if mechanism == "switch_llm":
            return self._other_llm() is not None
        if mechanism == "flashback":
            return facts.flashback
        if mechanism == "world_check":
            return bool(facts.unread_feed_items or facts.active_feeds)
        if mechanism == "task_switch":
            return facts.open_tasks >= 2
        if mechanism == "goal_reformulation":
            return facts.goal_id is not None
        if mechanism == "random_iteration":
            return bool(self._active_methods())
        if mechanism == "interest_memory":
            return self._forgotten_topic() is not None
        if mechanism == "ask_mesh":
            return bool(self._mesh_peers()[0]) or bool(episode.get("mesh_asked"))
        if mechanism == "simulate":
            return bool(episode.get("simulation")) or (
                self._thread_origin() != SIMULATION and self._task_to_move() is not None
            )
        return True

    def _facts(self) -> EscalationFacts:
        """What the mechanisms' applicability reads of the memory, in one query the first time it is asked (the
        mechanisms are all chosen before any is applied, and none of them changes what it reads)."""
        facts = self._read_facts
        if facts is None:
            facts = self._read_facts = self.house.strategies.escalation_facts(["kb"], FLASHBACK_TIERS)
        return facts

    def run(self, episode: StagnationEpisode, level: int) -> StagnationEpisode:
        """Apply the first `level` applicable mechanisms of the diagnosis's plan; returns the new episode."""
        recalled = list(self.state.context_report.get("recalled") or [])
        diagnosis = episode.get("diagnosis") or diagnose(self.house, self.state, episode, recalled)
        menu = self.house.strategies.escalation_menu()
        rows = menu.strategies  # the active ones
        self._methods: list[Any] = menu.methods
        chosen: list[str] = []
        wanted_mesh = False  # ask_mesh came up but had no peer: said so, and the next mechanism took its place
        # the order is fixed for the episode (the record of this episode must not reorder it mid-way)
        order = [m for m in episode.get("plan") or [] if m in rows] or plan(
            diagnosis,
            [(r.name, r.mechanism_class, r.cost, r.uses, r.helped) for r in rows.values()],
            self.house.strategies.ratings(),
        )
        for mechanism in order:
            if len(chosen) >= level:
                break
            if (mechanism not in MECHANISMS and rows[mechanism].instruction) or (
                mechanism in MECHANISMS and self.applicable(mechanism, episode)
            ):
                chosen.append(mechanism)
            elif mechanism == "ask_mesh":
                wanted_mesh = True
        before = set(episode.get("mechanisms") or [])
        added = [m for m in chosen if m not in before]
        episode = {
            **episode,
            "diagnosis": diagnosis,
            "mechanisms": chosen,
            "stimulus": [],
            "stimulus_sources": [],
            "instruction": "",
            "recalled_before": recalled,
            "plan": order,
            "added": added,
        }
        for mechanism in chosen:
            if mechanism in MECHANISMS:
                getattr(self, mechanism)(episode)
            else:  # the persona's own strategy: its instruction leads the next thought
                self._instruct(episode, rows[mechanism].instruction)
        if wanted_mesh:
            reason = self._mesh_peers()[1]
            episode["mesh_unavailable"] = reason
            episode["stimulus"].append(self._t(MESH_NONE_LINE).format(reason=reason))
        self.house.strategies.escalated(
            added,
            line=f"stagnant {episode.get('streak')} ticks; diagnosis {diagnosis}; "
            f"applying {', '.join(chosen) or 'nothing applicable'}",
            thread_id=self.state.thread_id,
        )
        return episode

    def _distant(self, items: list[Any]) -> Any:
        """The item farthest in meaning from the looping thought (the first one when embeddings are off)."""
        memory = self.services.memory
        if memory is None or len(items) < 2:
            return items[0]
        try:
            vectors = memory.embed_texts([self.thought] + [i.text for i in items])
        except Exception:
            log.exception("flashback: embeddings unavailable; taking a random memory")
            return items[0]
        scores = vectors[1:] @ vectors[0]
        return items[int(scores.argmin())]

    def flashback(self, episode: StagnationEpisode) -> None:
        recent = {m.content for m in self._recent_thoughts(20)}
        memory = self.house.memory
        items = [i for i in memory.sample_lines(FLASHBACK_TIERS, 40) if i.text not in recent] or memory.sample_lines(
            FLASHBACK_TIERS, 40
        )
        item = self._distant(items)
        when = f"{item.created_at:%Y-%m-%d}" if item.created_at else "earlier"
        episode["stimulus"].append(self._t(FLASHBACK_LINE).format(tier=item.tier, when=when, text=item.text[:600]))
        episode["flashback_item"] = item.id
        _came_from(episode, provenance.of_item(item))
        for sources in provenance.of_tainted_items(self.house.consent.taints_of, [item]).values():  # written from it
            episode["stimulus_sources"] = provenance.merged(episode.get("stimulus_sources"), sources)

    def read_kb(self, episode: StagnationEpisode) -> None:
        item = self._distant(self.house.memory.sample_lines(["kb"], 20))
        episode["stimulus"].append(self._t(KB_LINE).format(title=item.title or "a document", text=item.text[:800]))
        episode["kb_item"] = item.id
        _came_from(episode, provenance.of_item(item))

    def ask_human(self, episode: StagnationEpisode) -> None:
        if episode.get("asked_human"):
            return
        topic = " ".join(self.thought.split()[:12])
        text = self._t(ASK_HUMAN_TEXT).format(topic=topic)
        house = self.house
        told = house.conversation.tell(
            text,
            person=house.people.owner(),
            door=Door.WEB,
            tags=["anti_stagnation"],
            thread_id=self.state.thread_id,
            llm_id=self.state.llm.get("llm_id"),
            speaker=self.services.persona.display_name,
        )
        episode["asked_human"] = told.note_id
        self.emit({"event": "message", "to": "user", "text": text, "note_id": told.note_id, "tick": self.state.tick})

    def _t(self, text: str) -> str:
        """A fixed prompt text in the persona's prompt language (i18n)."""
        return i18n.text(text, self.services.settings.prompt_language)

    @staticmethod
    def _instruct(episode: StagnationEpisode, text: str) -> None:
        episode["instruction"] = "\n".join(part for part in (episode.get("instruction"), text) if part)

    def meta_analysis(self, episode: StagnationEpisode) -> None:
        self._instruct(episode, self._t(META_ANALYSIS_INSTRUCTION))

    def rationale_reflex(self, episode: StagnationEpisode) -> None:
        self._instruct(episode, self._t(RATIONALE_INSTRUCTION))

    def goal_reformulation(self, episode: StagnationEpisode) -> None:
        facts = self._facts()
        self._instruct(
            episode, self._t(GOAL_REFORMULATION_INSTRUCTION).format(id=facts.goal_id, title=facts.goal_title)
        )

    def task_switch(self, episode: StagnationEpisode) -> None:
        """Set the task in front aside for a while and take up another; the return is due when the loop ends."""
        current, *others = self.house.tasks.open_tasks(10)
        switch = episode.get("task_switch") or {}
        target = next((t for t in others if t.id == switch.get("to")), None) or others[0]
        episode["task_switch"] = {"from": current.id, "from_title": current.title, "to": target.id}
        self._instruct(
            episode,
            self._t(TASK_SWITCH_INSTRUCTION).format(
                current=current.id, current_title=current.title, other=target.id, other_title=target.title
            ),
        )

    def random_iteration(self, episode: StagnationEpisode) -> None:
        """A thinking method drawn at random (HMP: a random action from the allowed set)."""
        rng = random.Random(f"{self.state.thread_id}:{self.state.tick}")
        method = self.house.strategies.draw_method(rng, self._active_methods())
        if method is None:  # applicable() found active methods; none left by now
            return
        episode["thinking_method"] = method.name
        self._instruct(
            episode, self._t(RANDOM_ITERATION_INSTRUCTION).format(name=method.name, instruction=method.instruction)
        )

    def _recent_thoughts(self, n: int) -> list[Any]:
        """The thread's last `n` thoughts (at most INTEREST_RECENT), read once for every mechanism that asks."""
        if getattr(self, "_recent", None) is None:
            self._recent = self.house.thoughts.recent_lines(
                self.state.thread_id, max(n, INTEREST_RECENT), columns=("id", "content", "tags")
            )
        return self._recent[-n:]

    def _active_methods(self) -> list[Any]:
        """The active thinking methods, as `run` read them (or now, for a mechanism applied on its own)."""
        if getattr(self, "_methods", None) is None:
            self._methods = self.house.strategies.methods()
        return self._methods

    def _forgotten_topic(self) -> tuple[str, int] | None:
        """HMP's interest memory: the most used tag that none of my recent thoughts touched (thematic fatigue
        turned around: what I have not come back to)."""
        if hasattr(self, "_forgotten"):
            return self._forgotten
        recent = self._recent_thoughts(INTEREST_RECENT)
        seen = " ".join(m.content.lower() for m in recent) + " " + self.thought.lower()
        seen_tags = {str(t).lower() for m in recent for t in (getattr(m, "tags", None) or [])}
        self._forgotten = next(
            (
                (tag, n)
                for tag, n in self.house.tags.stats().items()
                if tag.lower() not in seen and tag.lower() not in seen_tags
            ),
            None,
        )
        return self._forgotten

    def interest_memory(self, episode: StagnationEpisode) -> None:
        forgotten = self._forgotten_topic()
        if forgotten is None:  # applicable() found one; nothing to bring back by now
            return
        tag, uses = forgotten
        entries = self.house.diary.list(tag=tag, limit=1, debug=None)
        example = entries[0].text[:400] if entries else ""
        episode["stimulus"].append(self._t(INTEREST_LINE).format(tag=tag, uses=uses, example=example).rstrip(": "))
        episode["interest_tag"] = tag

    def world_check(self, episode: StagnationEpisode) -> None:
        """The newest unread feed item, read now; with none unread, the loop is asked (once an episode) to fetch the
        feeds at once."""
        item = self.house.world.read_newest_unread()
        if item is not None:
            episode["stimulus"].append(self._t(WORLD_LINE).format(text=item.text[:800]))
            episode["world_item"] = item.id
            _came_from(episode, provenance.of_note(item))
        elif not episode.get("world_asked"):  # once an episode: endless scrolling is no cure (HMP's memetic pit)
            self.house.world.ask_fetch()
            episode["world_asked"] = True
            episode["stimulus"].append(self._t(WORLD_ASKED_LINE))
        else:
            episode["stimulus"].append(self._t(WORLD_NOTHING_LINE))

    def change_context(self, episode: StagnationEpisode) -> None:
        cycle = self.services.reads.get(
            self.state.thread_id,
            self.state.tick,
            CYCLE,
            lambda: self.house.loop.context_cycle(self.state.thread_id),
        )
        current = context_mode(cycle)
        episode["context_mode"] = "meditation" if current != "meditation" else "standard"

    def _other_llm(self) -> str | None:
        author = self.state.llm.get("llm_id")
        return next((i for i in self.services.llms.order(author) if i != author), None)

    def switch_llm(self, episode: StagnationEpisode) -> None:
        episode["llm"] = self._other_llm()

    def pause(self, episode: StagnationEpisode) -> None:
        episode["pause_s"] = float(self.services.settings.reflexes.stagnation_pause_s)

    # ---- ask the mesh ------------------------------------------------------------------------------------------------

    def _mesh_peers(self) -> tuple[list[str], str]:
        """(the peers to ask, most trusted first; why none when there are none)."""
        if getattr(self, "_peers", None) is None:
            settings = self.services.settings
            if not settings.mesh.enabled:
                self._peers: tuple[list[str], str] = ([], "the mesh is off (config.yaml mesh.enabled)")
            else:
                reputation = self.house.reputation
                peers = [
                    did
                    for did in reputation.rank(reputation.known())
                    if reputation.trust(did) >= settings.mesh.min_trust
                ][: settings.reflexes.mesh_ask_peers]
                self._peers = (peers, "" if peers else "no peer on the mesh is known yet")
        return self._peers

    def ask_mesh(self, episode: StagnationEpisode) -> None:
        """Once an episode: `mesh.ask` to each peer, through the consent model (reaching out is `external`)."""
        asked = episode.get("mesh_asked")
        if not asked:
            settings, state, now = self.services.settings, self.state, self.services.clock()
            text = self._t(MESH_QUESTION).format(topic=" ".join(self.thought.split()[:12]))
            house = self.house
            approved = "mesh.ask" in settings.consent.auto_approve
            asked = {}
            for n, did in enumerate(self._mesh_peers()[0], 1):
                key = f"{state.thread_id}:{state.tick}:ask_mesh-{n}"
                reason = "anti-stagnation: ask the mesh for something new"
                if approved:
                    container = house.mesh.compose("ask", {"text": text}, recipient=did)
                    house.consent.record(
                        thread_id=state.thread_id,
                        tick=state.tick,
                        cmd_key=key,
                        type="mesh.ask",
                        effect="external",
                        decision="executed",
                        actor="policy",
                        now=now,
                        reason=f"{reason}; mesh.ask is approved in advance (consent.auto_approve)",
                    )
                    asked[did] = container["id"]
                else:
                    row, _ = house.consent.request(
                        cmd_key=key,
                        cmd_id=f"ask_mesh-{n}",
                        type="mesh.ask",
                        args={"to": did, "text": text},
                        effect="external",
                        description=reason,
                        reason=f"{reason}: external needs my human's approval",
                        thread_id=state.thread_id,
                        root_thread=state.root_thread or state.thread_id,
                        tick=state.tick,
                        now=now,
                    )
                    asked[did] = f"approval {row.id}"
            episode["mesh_asked"] = asked
        how = "sent" if any(str(v).startswith("sha256:") for v in asked.values()) else "waiting for my human's approval"
        episode["stimulus"].append(self._t(MESH_ASKED_LINE).format(peers=len(asked), how=how))

    # ---- move the task to a simulated environment --------------------------------------------------------------------

    def _thread_origin(self) -> str | None:
        """The thread's origin, from its row as the tick's first step read it (an origin never changes)."""
        state = self.state
        thread = self.services.reads.get(
            state.thread_id, state.tick, ("thread", state.thread_id), lambda: self.house.threads.get(state.thread_id)
        )
        return thread.origin if thread is not None else None

    def _task_to_move(self) -> str | None:
        """The title of what would be rehearsed: the open task in front (HMP moves a task, not a goal)."""
        facts = self._facts()
        return f"task {facts.task_id}: {facts.task_title}" if facts.task_id is not None else None

    def simulate(self, episode: StagnationEpisode) -> None:
        """Open a Stelis child of origin `simulation` for the task and make it the thread the next ticks run in."""
        if episode.get("simulation"):
            return
        title = self._task_to_move()
        if title is None:  # applicable() found one; none left by now
            return
        state, settings = self.state, self.services.settings
        label = f"simulation: {title}"[:200]
        threads = self.house.threads
        try:
            child, _, _ = threads.open_child(
                parent_id=state.thread_id,
                child_id=child_thread_id(state.thread_id, label, f"t{state.tick}-simulate"),
                label=label,
                window_ratio=DEFAULT_WINDOW_RATIO,
                max_depth=settings.stelis.max_depth,
                origin=SIMULATION,
                persona=self.services.persona.name,
                owner=process_token(),
                tick=state.tick,
                chronicle_prompt=self._t(SIMULATION_CHRONICLE),
            )
        except StelisRefused as exc:
            episode["simulation"] = f"refused: {exc}"
            episode["stimulus"].append(self._t(SIMULATION_REFUSED_LINE).format(title=title, reason=exc))
            return
        threads.set_active(state.root_thread or state.thread_id, child.id)
        episode["simulation"] = child.id
        episode["stimulus"].append(self._t(SIMULATION_LINE).format(title=title, thread=child.id))
        self.emit(
            {"event": "stelis_enter", "thread_id": child.id, "label": label, "depth": child.depth, "origin": SIMULATION}
        )
