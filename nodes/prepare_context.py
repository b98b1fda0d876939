"""Step 2 (HMP §2, DESIGN §3.1): assemble the prompt under the thread's token budget.

Blocks come in the order of DESIGN §3.1 (earlier = stronger influence); each has a priority. When the
prompt does not fit `window × window_ratio − max_tokens`, the lowest-priority block loses its oldest
item first (recent responses, notepad entries), then whole blocks go; every drop is reported in
`context_report` and logged. Incoming notes are only marked read after the response is stored
(write_memory), so a crash never loses one.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from langgraph.runtime import Runtime

from memory import Repos
from memory.settings import persona_setting
from persona import refresh_persona, skills_block
from nodes.commands.help import command_guide
from nodes.context import AnimaContext, ContextBudgetError, Services, services_of
from nodes.recall import abstract_lines, auto_recall, context_cycle, context_mode, entity_lines, episode_lines, goal_lines, recent_thoughts, strategy_line
from persona.drives import Drives, DriveSettings, feeling_lines
from persona.prompts import FEELINGS_TITLE, REACH_OUT, REACH_OUT_INSTRUCTION
from nodes.prompts import (CHANNEL_HINT, TASK_CYCLE_SEED, CHAT_INSTRUCTION, COMMANDS_GUIDE, CONTINUATION_FEELINGS,
                           CONTINUATION_HUMAN_TURN, CONTINUATION_REACH_OUT, CONTINUATION_TOOLS, STIMULUS_TITLE,
                           THOUGHT_HEADER)
from nodes.state import TickState
from nodes.stelis import thread_window

log = logging.getLogger(__name__)
SAFETY_TOKENS = 16
BOOTSTRAP_LAYER = ("AGENTS.md", "HEARTBEAT.md", "BOOTSTRAP.md")  # claw0 layer 6: the remaining bootstrap files


@dataclass
class Block:
    name: str
    title: str
    items: list[str]
    priority: int
    system: bool = False
    trim_oldest: bool = False  # drop items one by one (oldest first) before dropping the block
    tokens: list[int] = field(default_factory=list)
    keys: list[Any] = field(default_factory=list)  # optional ids parallel to items (which notes were shown)

    def render(self) -> str:
        if not self.items:
            return ""
        body = "\n".join(self.items)
        return f"# {self.title}\n{body}" if self.title else body


def fit_blocks(blocks: list[Block], budget: int, count: Callable[[str], int]) -> tuple[list[Block], list[str]]:
    """Drop lowest-priority content until the blocks fit `budget` tokens. Returns (blocks, drops)."""
    for block in blocks:
        block.tokens = [count(item) + 1 for item in block.items]
    header_cost = {b.name: count(f"# {b.title}\n") + 2 if b.title else 0 for b in blocks}

    def total() -> int:
        return sum(sum(b.tokens) + (header_cost[b.name] if b.items else 0) for b in blocks)

    drops: list[str] = []
    while total() > budget:
        candidates = [b for b in blocks if b.items and b.priority < 1000]
        if not candidates:
            break
        victim = min(candidates, key=lambda b: b.priority)
        if victim.trim_oldest and len(victim.items) > 1:
            victim.items.pop(0)
            removed = victim.tokens.pop(0)
            if victim.keys:
                victim.keys.pop(0)
            drops.append(f"{victim.name}: oldest item ({removed} tokens)")
        else:
            drops.append(f"{victim.name}: whole block ({sum(victim.tokens)} tokens)")
            victim.items, victim.tokens, victim.keys = [], [], []
    return blocks, drops


def _note_line(note) -> str:
    return f"[note {note.id} from {note.source}, priority {note.priority}] {note.text}"


def _incoming(repos: Repos, svc: Services, cycle: dict[str, Any]) -> tuple[list[Any], list[str]]:
    mode = cycle.get("notes_mode") or svc.settings.notes_mode
    notes = repos.notes.unread_incoming(limit=svc.settings.notes_limit, min_priority=cycle.get("notes_min_priority"))
    if mode == "manual":
        counts = repos.notes.count_unread_by_priority()
        lines = [f"{sum(counts.values())} unread note(s); by priority: {counts}. Read one with notes.read."]
        lines += [f"- note {n.id} from {n.source}, priority {n.priority}" for n in notes]
        return [], lines if counts else []
    return notes, [_note_line(n) for n in notes]


def _chat_blocks(svc: Services, repos: Repos, state: TickState, cycle: dict[str, Any], note_lines: list[str],
                 note_keys: list[int], processes: list[Any], notes: list[Any]) -> tuple[list[Block], dict[str, Any]]:
    persona, tick, thread_id = svc.persona, state["tick"], state["thread_id"]
    guide = COMMANDS_GUIDE.format(tick=tick, commands=command_guide())
    if persona.file("TOOLS.md"):
        guide = persona.file("TOOLS.md").strip() + "\n\n" + guide
    principles = (persona.ethics or {}).get("principles") or []
    responses_k = int(cycle.get("responses", svc.settings.responses))
    history, shown_ids = recent_thoughts(repos, thread_id, responses_k, cycle, svc.memory)
    recalled, recalled_ids, recall_error = auto_recall(svc, repos, thread_id, notes, shown_ids, cycle)
    core, notepad = repos.blocks.get("core").content, repos.blocks.get("notepad").content
    now = svc.clock()
    bootstrap = [persona.file(n).strip() for n in BOOTSTRAP_LAYER if persona.file(n).strip()]
    blocks = [
        Block("identity", "", [persona.file("IDENTITY.md").strip()], 200, system=True),
        Block("soul", "", [persona.file("SOUL.md").strip()], 190, system=True),
        Block("commands", "", [guide], 180, system=True),
        Block("skills", "", [skills_block(persona.skills)] if persona.skills else [], 175, system=True),
        Block("ethics", "Ethics", [f"- {p}" for p in principles], 170, system=True),
        Block("bootstrap", "", bootstrap, 160, system=True),
        Block("core", "Core memory (who I am, my human, my promises)",
              [x for x in (persona.file("USER.md").strip(), persona.file("MEMORY.md").strip(), core.strip()) if x], 125),
        Block("notepad", "My notepad", [notepad.strip()] if notepad.strip() else [], 118),
        Block("strategy", "Strategy from my last dream", strategy_line(repos), 115),
        Block("goals", "My goals and tasks", goal_lines(repos), 122),
        Block("recall", "Memories that came to mind", recalled, 112, trim_oldest=True, keys=list(reversed(recalled_ids))),
        Block("entities", "People and things I know", entity_lines(repos, [n.text for n in notes] + recalled), 108,
              trim_oldest=True),
        Block("episodes", "Recent days", episode_lines(repos, int(persona_setting(repos, persona.config, "memory.episode_days", 3))), 104,
              trim_oldest=True),
        Block("feelings", FEELINGS_TITLE, _feelings(state.get("drives") or {}), 140),
        Block("abstracts", "Abstracts of my recent thinking",
              abstract_lines(repos, now, cycle.get("focus_tags")), 105, trim_oldest=True),
        Block("processes", "Open processes (results of my commands)",
              [f"[process {p.id} {p.name}: {p.status}] {p.value}" for p in processes], 130, trim_oldest=True),
        Block("notes", "Incoming notes", note_lines, 195, trim_oldest=True, keys=note_keys),
        Block("runtime", "Runtime", [f"time {now:%Y-%m-%d %H:%M} UTC; tick {tick}; mode {state.get('mode', 'chat')}; "
                                     f"context {context_mode(cycle)}; thread {thread_id}",
                                     CHANNEL_HINT.get(svc.settings.channel, CHANNEL_HINT["terminal"])], 150),
        Block("recent", "My recent thoughts", history, 100, trim_oldest=True),
        Block("llm_memory", "My notepad of ideas (llm_memory)",
              [f"[{m.id}] {m.title + ': ' if m.title else ''}{m.content}" for m in repos.llm_memory.recent(20)], 110,
              trim_oldest=True),
    ]
    return blocks, {"recalled": recalled_ids, "recall_error": recall_error}


def _continuation_text(svc: Services, repos: Repos, state: TickState, notes: list[Any]) -> tuple[list[str], list[str]]:
    """The growing text: last compression (or the seed), every chunk since, then new human turns."""
    thread_id = state["thread_id"]
    compression = repos.messages.last_of_kind(thread_id, "compression")
    base = (compression.content + CONTINUATION_TOOLS) if compression else (svc.persona.seed or "")
    chunks = [m.content for m in repos.messages.since(thread_id, compression.id if compression else 0,
                                                      ("continuation", "human"))]
    name, now = svc.persona.display_name, svc.clock()
    turns = [CONTINUATION_HUMAN_TURN.format(time=f"{now:%H:%M}", text=n.text, name=name) for n in notes]
    return [base, *chunks], turns


def _continuation_inner_state(name: str, drives: dict[str, Any]) -> str:
    """The drives at or above their threshold, and the reach-out offer, as a passing thought in the stream.
    Not shown while the human's turn is open: then the next words are the answer."""
    feelings = _feelings(drives)
    text = CONTINUATION_FEELINGS.format(name=name, feelings="; ".join(feelings)) if feelings else ""
    offer = drives.get("reach_out")
    if offer:
        text += CONTINUATION_REACH_OUT.format(name=name, drive=offer["drive"])
    return text


def _feelings(drives: dict[str, Any]) -> list[str]:
    if not drives.get("levels"):
        return []
    return feeling_lines(Drives(drives["levels"], drives.get("details") or {}),
                         DriveSettings(inject_at=float(drives.get("inject_at", DriveSettings.inject_at))))


def _refresh_persona(svc: Services) -> None:
    """An edited persona file shapes the very next prompt; a broken edit keeps the last good persona."""
    try:
        svc.persona = refresh_persona(svc.persona)
    except Exception as exc:  # PersonaError or an unreadable file
        log.error("persona files not reloaded (the last good version stays in use): %s", exc)


def prepare_context(state: TickState, runtime: Runtime[AnimaContext], params: dict[str, Any] | None = None) -> dict:
    svc = services_of(runtime)
    _refresh_persona(svc)
    count = svc.llms.primary().count_tokens
    max_tokens = int((state.get("sampling") or {}).get("max_tokens", svc.settings.sampling.max_tokens))
    with svc.db.unit() as repos:
        window = thread_window(svc, repos, state["thread_id"])
        max_tokens = max(16, min(max_tokens, window // 2))
        budget = window - max_tokens - SAFETY_TOKENS
        cycle = context_cycle(repos, svc.persona.config, state["thread_id"])
        episode = state.get("stagnation") or {}
        if episode.get("context_mode"):  # the anti-stagnation "change of context" mechanism
            cycle["context_mode"] = episode["context_mode"]
        task = repos.tasks.by_repl_thread(state["thread_id"])
        # a task's sub-cycle reads no notes: its seed is the task; what it finds goes to the main loop as notes
        notes, note_lines = _incoming(repos, svc, cycle) if task is None else ([], [])
        processes = repos.processes.open(state["thread_id"])
        if state.get("mode") == "continuation":
            parts, all_turns = _continuation_text(svc, repos, state, notes)
            drops: list[str] = []
            shown_notes, turns, fixed = [], [], 0
            for note, turn in zip(notes, all_turns):  # human turns take at most half the budget
                size = count(turn)
                if fixed + size <= budget // 2:
                    shown_notes.append(note)
                    turns.append(turn)
                    fixed += size
                else:
                    drops.append(f"note {note.id}: waits for a later tick ({size} tokens)")
            sizes = [count(p) for p in parts]
            total = sum(sizes) + fixed
            while len(parts) > 1 and total > budget:
                drops.append(f"continuation: oldest chunk ({sizes[1]} tokens)")
                total -= sizes.pop(1)
                parts.pop(1)
            stimulus = ("\n\n(" + " ".join(episode["stimulus"]) + ")\n") if episode.get("stimulus") else ""
            inner = _continuation_inner_state(svc.persona.display_name, state.get("drives") or {}) if not turns else ""
            if inner and count(inner) + sum(sizes) + fixed > budget:
                drops.append("feelings: no room in the budget")
                inner = ""
            prompt = "".join(parts) + "".join(turns) + inner + stimulus
            if count(prompt) > budget:  # even the base alone is too long: keep its end
                drops.append("continuation: base cut at the front")
                base = "".join(parts)
                while count(base + "".join(turns)) > budget and base:
                    base = base[max(1, len(base) // 8):]
                prompt = base + "".join(turns)
            messages: list[dict[str, str]] = []
            recall_report = {}
        else:
            turns = []
            recall_report: dict[str, Any] = {}
            note_keys = [n.id for n in notes] if len(notes) == len(note_lines) else []
            blocks, recall_report = _chat_blocks(svc, repos, state, cycle, note_lines, note_keys, processes, notes)
            blocks.append(Block("stimulus", STIMULUS_TITLE, list(episode.get("stimulus") or []), 160))
            if task is not None:
                blocks.append(Block("task", "", [TASK_CYCLE_SEED.format(
                    name=svc.persona.display_name, id=task.id, title=task.title, status=task.status,
                    description=task.description or "(no description)",
                    goal=f"it serves goal {task.goal_id}" if task.goal_id else "it serves no goal in particular")], 198,
                    system=True))
            header = THOUGHT_HEADER.format(name=svc.persona.display_name, tick=state["tick"])
            instruction = episode.get("rephrased") or CHAT_INSTRUCTION  # reflex-lite's rephrased request
            if episode.get("instruction"):  # the meta-analysis mechanism
                instruction = episode["instruction"] + "\n" + instruction
            offer = (state.get("drives") or {}).get("reach_out")
            if offer:  # the drives' one rule allowed an unprompted message this tick
                instruction = REACH_OUT_INSTRUCTION.format(drive=offer["drive"], level=offer["level"],
                                                           why=REACH_OUT[offer["drive"]]) + "\n" + instruction
            fixed_text = instruction + "\n\n" + header
            if count(fixed_text) + 8 > budget:
                raise ContextBudgetError(f"the thread's budget of {budget} tokens cannot hold even the instruction")
            blocks, drops = fit_blocks(blocks, budget - count(fixed_text) - 8, count)
            kept = set(next(b.keys for b in blocks if b.name == "notes"))
            recall_report["recalled"] = list(next(b.keys for b in blocks if b.name == "recall"))
            repos.items.touch(recall_report["recalled"], svc.clock())  # shown: counts as a use (LRU)
            shown_notes = [n for n in notes if n.id in kept]
            system = "\n\n".join(b.render() for b in blocks if b.system and b.items)
            user = "\n\n".join(b.render() for b in blocks if not b.system and b.items)
            layers = [{"layer": b.name, "items": len(b.items), "tokens": sum(b.tokens), "system": b.system}
                      for b in blocks if b.items] + [{"layer": "instruction", "items": 1, "tokens": count(fixed_text),
                                                       "system": False}]
            recall_report["layers"] = layers
            messages = [{"role": "system", "content": system},
                        {"role": "user", "content": f"{user}\n\n{fixed_text}".lstrip()}]
            prompt = f"{system}\n\n{messages[1]['content']}"
    for drop in drops:
        log.info("context budget %s tokens: dropped %s", budget, drop)
    report = dict(state.get("context_report") or {})
    report.update({"window_tokens": window, "budget_tokens": budget, "max_tokens": max_tokens, "dropped": drops,
                   "notes": [n.id for n in shown_notes], "processes": [p.id for p in processes], **recall_report})
    return {
        "prompt": prompt,
        "prompt_messages": messages,
        "prompt_tokens": count(prompt),
        "incoming_note_ids": [n.id for n in shown_notes],
        "human_turns": turns,
        "shown_process_ids": [p.id for p in processes],
        "context_report": report,
    }
