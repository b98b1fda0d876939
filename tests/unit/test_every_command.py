"""Every registered command, executed: one row per command in `ROWS` — (command, arguments, setup, check) — run
through a real tick of one persona (FakeLLM, the real SQLite and Chroma stack, a real MCP server over stdio, a local
HTTP server for feeds and web search, the real sandbox for scripts). A privileged command (`modify_self`,
`external`, owner-only) first parks as an approval; the owner approves it and the next tick runs it, as on the
Approvals page. Each row's check asserts the command's effect — what was stored, changed, queued or shown — not
only that it ran. `test_every_registered_command_has_a_row` fails, naming the command, when a command is
registered that no row executes: a new command is one row here.

Each row ticks on a thread of its own (its cycle settings, process log and recent thoughts are its own) and starts
with every note read, so what one row leaves behind (a feed item, a model's answer) is not in the next one's prompt.
A few scenarios that need more than one command or tick follow the table."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from managers import ManagerDeps, Managers
from managers.conversation import Words
from memory.models import (
    AgentRecord,
    AgentScript,
    AgentTable,
    Concept,
    ConceptLink,
    DiaryEntry,
    Goal,
    LLMMemory,
    MeshContainer,
    Note,
    StagnationStrategy,
    Task,
    ThinkingMethod,
)
from memory.note_kinds import Door
from nodes.commands import FAMILIES, PRIVILEGED, registry
from persona import default_persona_dir
from reach import sandbox
from reach.hmp.containers import encode, seal
from reach.hmp.identity import Identity
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import managers_over
from tests.integration.world_server import world_server

MCP_SERVER = Path(__file__).resolve().parent.parent / "integration" / "mcp_tools_server.py"


def block(*commands: tuple[str, dict[str, Any]]) -> str:
    cmds = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "A thought.\n# Commands:\n" + json.dumps(cmds) + "\n# End commands"


# ---- the persona every row runs on -----------------------------------------------------------------------------------


@dataclass
class Persona:
    agent: Any
    fake: FakeLLM
    data_dir: Path
    persona_dir: Path
    world: str  # the local HTTP server: feeds and web search

    @property
    def services(self) -> Any:
        return self.agent.services

    @contextmanager
    def house(self) -> Iterator[Managers]:
        """The managers over one unit of work, as a door holds them."""
        services = self.services
        with services.db.unit() as repos:
            yield Managers(
                repos,
                ManagerDeps(
                    settings=services.settings, clock=services.clock, memory=services.memory, llms=services.llms
                ),
            )


@dataclass
class Scene:
    """What a row's setup, check and cleanup see: the persona, the row's thread, what its setup returned and what
    the command answered."""

    persona: Persona
    thread: str
    given: Any = None
    result: str = ""
    later: list[Callable[[], None]] = field(default_factory=list)  # what the setup runs once its unit committed

    @property
    def now(self):
        return self.persona.services.clock()


Setup = Callable[[Scene, Managers], Any]
Check = Callable[[Scene, Managers], None]


@dataclass(frozen=True)
class Row:
    command: str
    args: dict[str, Any] | Callable[[Any], dict[str, Any]]
    check: Check  # asserts the effect (in a fresh unit of work, after the command committed)
    setup: Setup | None = None  # writes what the command acts on; returns what `args` and `check` need
    after: Setup | None = None  # puts back what the row changed that the rows after it would feel
    background: bool = False  # the command starts a job: wait for it before the check

    @property
    def id(self) -> str:
        return self.command


@pytest.fixture(scope="module")
def persona(tmp_path_factory) -> Iterator[Persona]:
    root = tmp_path_factory.mktemp("every-command")
    persona_dir = root / "persona"
    shutil.copytree(default_persona_dir(), persona_dir)  # mesh.adopt writes its ethics.yaml
    fake, second = FakeLLM("fake"), FakeLLM("second", responses=["Rivers carry dissolved salts to the sea."])
    scripts = {"enabled": True, "timeout_s": 30, "output_chars": 600}
    if sandbox.jail_problem() is not None:  # no bubblewrap here: the run still executes (make test installs it)
        scripts["jail"] = "none"
    with world_server() as (url, _):
        vault = root / "vault"
        vault.mkdir()
        (vault / "Harbour.md").write_text("---\ntags: [sea]\n---\nThe harbour master is called Ilse; see [[Tides]].\n")
        agent = make_agent(
            root / "data",
            fake,
            second,
            persona_dir=str(persona_dir),
            mesh={"enabled": True},
            scripts=scripts,
            tools={"vault": str(vault)},
            search={"backend": "http", "url": f"{url}/search", "params": {"format": "json"}, "max_results": 5},
            mcp={
                "servers": {
                    "tools": {
                        "transport": "stdio",
                        "command": sys.executable,
                        "args": [str(MCP_SERVER)],
                        "allow": ["add", "echo"],
                    }
                }
            },
        )
        try:
            agent.tick()  # the main thread's first tick: what a running persona has behind it
            yield Persona(agent, fake, root / "data", persona_dir, url)
        finally:
            agent.services.background().wait_idle(30)
            agent.services.db.close()


def execute(persona: Persona, row: Row, index: int) -> Scene:
    """The row's command through a tick on its own thread; approved by the owner and run by the next tick when it
    is privileged. Returns the scene its check reads."""
    scene = Scene(persona, thread=f"row-{index}")
    with persona.house() as house:  # a clean slate: what earlier rows left unread is not in this prompt
        house.notes.mark_read([n.id for n in house.repos.notes.list(unread_only=True, limit=1000)])
        if row.setup is not None:
            scene.given = row.setup(scene, house)
    for action in scene.later:
        action()
    args = row.args(scene.given) if callable(row.args) else row.args
    agent = persona.agent.sibling(persona.agent.playbook, scene.thread)
    persona.fake.responses = [block((row.command, args))]
    [done] = [e for e in agent.tick()["executed"] if e["cmd_id"] == "c1"]
    spec = registry().get(row.command)
    assert spec is not None, f"{row.command} is not a registered command"
    if spec.effect_for(spec.check(args)) in PRIVILEGED or spec.owner_only:
        assert done["status"] == "pending_approval", f"{row.command} ran without the owner: {done}"
        with persona.house() as house:
            approval = house.repos.approvals.get(done["approval_id"])
            assert (approval.type, approval.status) == (row.command, "pending")
            house.consent.answer(approval.id, approve=True, by="owner", now=scene.now)
        persona.fake.responses = ["I wait for what my human approved."]
        [done] = [e for e in agent.tick()["executed"] if e.get("approval_id") == approval.id]
    assert done["status"] == "executed", f"{row.command} {args}: {done['status']}: {done['result']}"
    scene.result = done["result"]
    if row.background:
        assert persona.services.background().wait_idle(60)
    return scene


# ---- small helpers for the rows --------------------------------------------------------------------------------------


def archived(house: Managers, model: type, row_id: int) -> bool:
    row = house.repos.session.get(model, int(row_id))
    assert row is not None
    if model in (Goal, Task):  # archived with a time, their status kept
        return row.archived_at is not None
    if model is Note:
        return bool(row.hidden)
    return row.status == "archived"


def outbox_of(house: Managers, type_: str) -> list[MeshContainer]:
    return [r for r in house.repos.session.query(MeshContainer).filter_by(direction="out", type=type_)]


PEER = Identity.generate()  # a peer on the mesh: what it sends is signed with this key


def learned_from_peer(scene: Scene, house: Managers) -> dict[str, Any]:
    """A CogSync container a peer published under a topic this persona follows, received and learned."""
    topic = f"tides{scene.thread.split('-')[-1]}"
    house.mesh.subscribe(topic)
    container = seal(
        PEER,
        "cogsync",
        {"kind": "diary", "text": "the neap tide is lowest at quarter moon", "tags": [topic], "local": "diary 1"},
        ttl=3600,
        topic=topic,
    )
    assert house.mesh.receive(encode(container)).status == "accepted"
    return container


def decided_case(scene: Scene, house: Managers) -> dict[str, Any]:
    """An ethics case with one solution, voted for by this persona: its tally has a result."""
    case = house.mesh.open_case(
        f"May a persona keep a secret for its human? ({scene.thread})", ["yes, if it harms nobody"]
    )
    [solution] = [r for r in house.mesh.case_rows(case["id"]) if r.type == "solution"]
    house.mesh.vote(case["id"], solution=solution.id)
    return case


# ---- the table: one row per command ----------------------------------------------------------------------------------

ROWS: list[Row] = [
    # help
    Row(
        "help.show",
        {"command": "diary"},
        check=lambda s, h: (
            _shows(s, "- diary.add {") and _shows(s, "- diary.search {") and _shows(s, "arguments: query* (text")
        ),
    ),
    # messages
    Row(
        "messages.send",
        {"text": "The spring tide peaks tonight at 21:40."},
        check=lambda s, h: _one_note(
            h, "The spring tide peaks tonight at 21:40.", source="llm", tags=["outgoing", "to:user"]
        ),
    ),
    # notes
    Row(
        "notes.add",
        {"text": "Buy a tide almanac.", "tags": ["todo"], "priority": 2},
        check=lambda s, h: _one_note(h, "Buy a tide almanac.", source="llm", tags=["todo"], priority=2),
    ),
    Row(
        "notes.list",
        {"source": "user", "limit": 100},
        setup=lambda s, h: h.repos.notes.add("Look at the tide tables.", source="user", priority=1).id,
        check=lambda s, h: (
            _shows(s, f"[note {s.given} from user, priority 1") and _shows(s, "Look at the tide tables.")
        ),
    ),
    Row(
        "notes.read",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.notes.add("The moon is full tonight.", source="user").id,
        check=lambda s, h: _shows(s, "The moon is full tonight.") and _true(h.repos.notes.get(s.given).read),
    ),
    Row(
        "notes.readmark",
        lambda g: {"ids": g, "read": True},
        setup=lambda s, h: [h.repos.notes.add(t, source="user").id for t in ("Low tide at six.", "High tide at noon.")],
        check=lambda s, h: (
            _equal(s.result, "2 note(s) marked") and _equal([h.repos.notes.get(i).read for i in s.given], [True, True])
        ),
    ),
    Row(
        "notes.tag",
        lambda g: {"id": g, "tags": ["todo", "sea"]},
        setup=lambda s, h: h.repos.notes.add("Check the harbour.", source="user", read=True).id,
        check=lambda s, h: _equal(sorted(h.repos.notes.get(s.given).tags), ["sea", "todo"]),
    ),
    Row(
        "notes.update",
        lambda g: {"id": g, "text": "Draw a wave, then a second.", "priority": 3},
        setup=lambda s, h: h.repos.notes.add("Draw a wave.", source="llm", read=True).id,
        check=lambda s, h: _equal(
            (h.repos.notes.get(s.given).text, h.repos.notes.get(s.given).priority), ("Draw a wave, then a second.", 3)
        ),
    ),
    Row(
        "notes.delete",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.notes.add("An old reminder.", source="llm", read=True).id,
        check=lambda s, h: (
            _true(archived(h, Note, s.given))
            and _true(s.given not in [n.id for n in h.repos.notes.list(limit=1000, include_hidden=False)])
        ),
    ),
    Row(
        "notes.share",
        lambda g: {"id": g},
        setup=lambda s, h: _note_and_a_friend(s, h),
        check=lambda s, h: _note_shared(s, h),
    ),
    # identity, core memory, notepad
    Row("identity.read", {}, check=lambda s, h: _shows(s, s.persona.services.persona.file("IDENTITY.md").strip()[:60])),
    Row(
        "identity.update",
        {"text": "I promised to keep a tide almanac."},
        check=lambda s, h: _true("I promised to keep a tide almanac." in h.identity.show("core")),
    ),
    Row(
        "core.read",
        {},
        setup=lambda s, h: h.identity.edit("core", text="My human lives by the sea."),
        check=lambda s, h: _shows(s, "My human lives by the sea."),
    ),
    Row(
        "core.update",
        {"text": "My human likes short answers."},
        check=lambda s, h: _true("My human likes short answers." in h.identity.show("core")),
    ),
    Row(
        "notepad.read",
        {},
        setup=lambda s, h: h.identity.edit("notepad", text="call the harbour master"),
        check=lambda s, h: _shows(s, "call the harbour master"),
    ),
    Row(
        "notepad.update",
        {"text": "buy a tide almanac"},
        check=lambda s, h: _true("buy a tide almanac" in h.identity.show("notepad")),
    ),
    Row(
        "notepad.clear",
        {},
        setup=lambda s, h: h.identity.edit("notepad", text="something to forget"),
        check=lambda s, h: (
            _true("something to forget" not in h.identity.show("notepad"))
            and _true(s.result.startswith("notepad cleared"))
        ),
    ),
    # llm_memory
    Row(
        "llm_memory.add",
        {"text": "Tides follow the moon.", "title": "hypothesis", "tags": ["sea"]},
        check=lambda s, h: _equal(
            [(r.title, r.tags) for r in h.repos.session.query(LLMMemory) if r.content == "Tides follow the moon."],
            [("hypothesis", ["sea"])],
        ),
    ),
    Row(
        "llm_memory.list",
        {"limit": 50},
        setup=lambda s, h: h.repos.llm_memory.add("The human prefers short answers.", title="style").id,
        check=lambda s, h: _shows(s, f"[{s.given}] style: The human prefers short answers."),
    ),
    Row(
        "llm_memory.delete",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.llm_memory.add("A plan I dropped.").id,
        check=lambda s, h: _true(archived(h, LLMMemory, s.given)),
    ),
    # diary
    Row(
        "diary.add",
        {"text": "Today I learnt the tide tables.", "tags": ["sea"], "emotions": ["joy"], "priority": 1},
        check=lambda s, h: _equal(
            [
                (e.tags, e.priority)
                for e in h.repos.diary.list(limit=100)
                if e.text == "Today I learnt the tide tables."
            ],
            [(["sea"], 1)],
        ),
    ),
    Row(
        "diary.list",
        {"tag": "harbour"},
        setup=lambda s, h: h.repos.diary.add("The harbour was calm.", tags=["harbour"]).id,
        check=lambda s, h: _shows(s, "The harbour was calm."),
    ),
    Row(
        "diary.read",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.diary.add("A heron stood in the shallows.").id,
        check=lambda s, h: _shows(s, f"[diary {s.given} ") and _shows(s, "A heron stood in the shallows."),
    ),
    Row(
        "diary.search",
        {"query": "cormorants drying their wings"},
        setup=lambda s, h: (
            h.diary.add(
                "Three cormorants were drying their wings on the pier.", tags=["birds"], thread_id=s.thread, tick=0
            ).id
        ),
        check=lambda s, h: _shows(s, "Three cormorants were drying their wings on the pier."),
    ),
    Row(
        "diary.update",
        lambda g: {"id": g, "text": "The fog lifted at noon.", "tags": ["weather"]},
        setup=lambda s, h: h.repos.diary.add("The fog lifted.").id,
        check=lambda s, h: _equal(
            (h.repos.session.get(DiaryEntry, s.given).text, h.repos.session.get(DiaryEntry, s.given).tags),
            ("The fog lifted at noon.", ["weather"]),
        ),
    ),
    Row(
        "diary.delete",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.diary.add("An entry I regret.").id,
        check=lambda s, h: _true(archived(h, DiaryEntry, s.given)),
    ),
    Row(
        "diary.pin",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.diary.add("The day the seals came back.").id,
        check=lambda s, h: _true(h.repos.session.get(DiaryEntry, s.given).pinned),
    ),
    Row(
        "diary.unpin",
        lambda g: {"id": g},
        setup=lambda s, h: _pinned_entry(h),
        check=lambda s, h: _equal(h.repos.session.get(DiaryEntry, s.given).pinned, False),
    ),
    # concepts and links
    Row(
        "concepts.add",
        {"name": "undertow", "description": "A current under the surf.", "tags": ["sea"], "weight": 2},
        check=lambda s, h: _equal(
            (h.repos.concepts.by_name("undertow").description, h.repos.concepts.by_name("undertow").weight),
            ("A current under the surf.", 2),
        ),
    ),
    Row(
        "concepts.list",
        {"limit": 100},
        setup=lambda s, h: h.repos.concepts.add("estuary", "Where the river meets the sea.").id,
        check=lambda s, h: _shows(s, f"[concept {s.given} estuary weight 1] Where the river meets the sea."),
    ),
    Row(
        "concepts.read",
        {"name": "lagoon"},
        setup=lambda s, h: _linked(h, "lagoon", "reef", "enclosed_by"),
        check=lambda s, h: _shows(s, "lagoon") and _shows(s, "—enclosed_by→ reef"),
    ),
    Row(
        "concepts.update",
        {"id": "shoal", "description": "Shallow water over a sandbank.", "weight": 3},
        setup=lambda s, h: h.repos.concepts.add("shoal", "Shallow.").id,
        check=lambda s, h: _equal(
            (h.repos.concepts.by_name("shoal").description, h.repos.concepts.by_name("shoal").weight),
            ("Shallow water over a sandbank.", 3),
        ),
    ),
    Row(
        "concepts.delete",
        {"id": "whirlpool"},
        setup=lambda s, h: h.repos.concepts.add("whirlpool", "A spinning current.").id,
        check=lambda s, h: _true(archived(h, Concept, s.given)),
    ),
    Row(
        "concepts.pin",
        {"id": "spring tide"},
        setup=lambda s, h: h.repos.concepts.add("spring tide", "The highest tide.").id,
        check=lambda s, h: _true(h.repos.concepts.by_name("spring tide").pinned),
    ),
    Row(
        "concepts.unpin",
        {"id": "neap tide"},
        setup=lambda s, h: _pinned_concept(h, "neap tide"),
        check=lambda s, h: _equal(h.repos.concepts.by_name("neap tide").pinned, False),
    ),
    Row(
        "links.add",
        {"source": "gull", "target": "harbour", "relation": "lives_in", "weight": 2},
        setup=lambda s, h: [h.repos.concepts.add(n).id for n in ("gull", "harbour")],
        check=lambda s, h: _equal(
            [(item.relation, item.weight) for item in h.repos.links.list(s.given[0]) if item.target_id == s.given[1]],
            [("lives_in", 2)],
        ),
    ),
    Row(
        "links.list",
        {"concept": "dune"},
        setup=lambda s, h: _linked(h, "dune", "marram grass", "held_by"),
        check=lambda s, h: _shows(s, "dune —held_by→ marram grass"),
    ),
    Row(
        "links.read",
        lambda g: {"id": g},
        setup=lambda s, h: _linked(h, "cliff", "erosion", "shaped_by"),
        check=lambda s, h: _shows(s, f"[link {s.given}] cliff —shaped_by→ erosion"),
    ),
    Row(
        "links.update",
        lambda g: {"id": g, "relation": "caused_by", "weight": 3},
        setup=lambda s, h: _linked(h, "wave", "wind", "related_to"),
        check=lambda s, h: _equal(
            (h.repos.links.get(s.given).relation, h.repos.links.get(s.given).weight), ("caused_by", 3)
        ),
    ),
    Row(
        "links.delete",
        lambda g: {"id": g},
        setup=lambda s, h: _linked(h, "jetty", "boat", "holds"),
        check=lambda s, h: _true(archived(h, ConceptLink, s.given)),
    ),
    # goals and tasks
    Row(
        "goals.add",
        {
            "title": "Understand the sea",
            "horizon": "long",
            "priority": 2,
            "constraints": ["stay honest"],
            "related_values": ["curiosity"],
        },
        check=lambda s, h: _equal(
            [
                (g.horizon, g.priority, g.constraints, g.related_values)
                for g in h.repos.goals.list()
                if g.title == "Understand the sea"
            ],
            [("long", 2, ["stay honest"], ["curiosity"])],
        ),
    ),
    Row(
        "goals.list",
        {"status": "active"},
        setup=lambda s, h: h.repos.goals.add("Learn to sail").id,
        check=lambda s, h: _shows(s, f"[goal {s.given} short active priority 1] Learn to sail"),
    ),
    Row(
        "goals.read",
        lambda g: {"id": g[0]},
        setup=lambda s, h: _goal_with_tasks(h),
        check=lambda s, h: (
            _shows(s, "Map the bay") and _shows(s, "Sound the channel") and _shows(s, "tasks done: 0/1 (0.0%)")
        ),
    ),
    Row(
        "goals.update",
        lambda g: {"id": g, "priority": 3, "progress": "read one chapter", "title": "Know the sea"},
        setup=lambda s, h: h.repos.goals.add("Know the tides").id,
        check=lambda s, h: _equal(
            (
                h.repos.goals.get(s.given).title,
                h.repos.goals.get(s.given).priority,
                h.repos.goals.get(s.given).progress_notes[-1],
            ),
            ("Know the sea", 3, "read one chapter"),
        ),
    ),
    Row(
        "goals.delete",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.goals.add("A goal I gave up").id,
        check=lambda s, h: _true(archived(h, Goal, s.given)),
    ),
    Row(
        "tasks.add",
        {"title": "Read about tides", "priority": 2, "pinned": True, "tags": ["sea"]},
        check=lambda s, h: _equal(
            [(t.priority, t.pinned) for t in h.repos.tasks.list() if t.title == "Read about tides"], [(2, True)]
        ),
    ),
    Row(
        "tasks.list",
        lambda g: {"goal_id": g[0]},
        setup=lambda s, h: _goal_with_tasks(h),
        check=lambda s, h: _shows(s, f"[task {s.given[1]} open priority 1 goal {s.given[0]}] Sound the channel"),
    ),
    Row(
        "tasks.read",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.tasks.add("Count the buoys", description="Start at the harbour mouth.").id,
        check=lambda s, h: _shows(s, "Count the buoys") and _shows(s, "Start at the harbour mouth."),
    ),
    Row(
        "tasks.update",
        lambda g: {"id": g, "status": "done", "priority": 4},
        setup=lambda s, h: h.repos.tasks.add("Tie a bowline").id,
        check=lambda s, h: _equal(
            (h.repos.tasks.get(s.given).status, h.repos.tasks.get(s.given).priority), ("done", 4)
        ),
    ),
    Row(
        "tasks.delete",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.tasks.add("A task I dropped").id,
        check=lambda s, h: _true(archived(h, Task, s.given)),
    ),
    Row(
        "tasks.pin",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.tasks.add("Check the anchor").id,
        check=lambda s, h: _true(h.repos.tasks.get(s.given).pinned),
    ),
    Row(
        "tasks.unpin",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.tasks.add("Coil the rope", pinned=True).id,
        check=lambda s, h: _equal(h.repos.tasks.get(s.given).pinned, False),
    ),
    Row(
        "tasks.run",
        lambda g: {"id": g, "mode": "read_only", "max_ticks": 2},
        setup=lambda s, h: h.repos.tasks.add("Survey the rock pools").id,
        check=lambda s, h: _task_cycle_started(s, h),
        after=lambda s, h: h.tasks.stop_cycle(s.given),
    ),
    Row(
        "tasks.stop",
        lambda g: {"id": g},
        setup=lambda s, h: _running_task(s, h),
        check=lambda s, h: _equal(
            (h.repos.tasks.get(s.given).repl_status, h.repos.tasks.get(s.given).repl_error),
            ("stopped", "stopped by the main loop"),
        ),
    ),
    # memory: search, archive, restore
    Row(
        "memory.search",
        {"query": "lighthouse keeper's logbook", "tiers": ["diary"]},
        setup=lambda s, h: (
            h.diary.add("I found the lighthouse keeper's logbook from 1911.", thread_id=s.thread, tick=0).id
        ),
        check=lambda s, h: _shows(s, "I found the lighthouse keeper's logbook from 1911."),
    ),
    Row(
        "search.query",
        {"query": "kelp forest otters"},
        setup=lambda s, h: (
            h.diary.add("Sea otters wrap themselves in the kelp forest to sleep.", thread_id=s.thread, tick=0).id
        ),
        check=lambda s, h: _shows(s, "Sea otters wrap themselves in the kelp forest to sleep."),
    ),
    Row(
        "kb.search",
        {"query": "honeybees dance"},
        setup=lambda s, h: h.repos.kb.add(
            "notes/bees.md", "Bees", "sha-bees", ["Honeybees dance on the comb to show where flowers are."]
        ),
        check=lambda s, h: _shows(s, "Honeybees dance on the comb"),
    ),
    Row(
        "memory.archive",
        lambda g: {"tier": "diary", "ref": str(g)},
        setup=lambda s, h: h.repos.diary.add("A memory to set aside.").id,
        check=lambda s, h: _true(archived(h, DiaryEntry, s.given)),
    ),
    Row(
        "memory.restore",
        lambda g: {"tier": "diary", "ref": str(g)},
        setup=lambda s, h: _archived_entry(s, h, "A memory to bring back."),
        check=lambda s, h: _equal(h.repos.session.get(DiaryEntry, s.given).status, "active"),
    ),
    Row(
        "memory.archived",
        {"limit": 100},
        setup=lambda s, h: _archived_entry(s, h, "The storm of last winter."),
        check=lambda s, h: _shows(s, f"[diary {s.given} · archived") and _shows(s, "The storm of last winter."),
    ),
    Row(
        "tools.used",
        {"kind": "link"},
        setup=lambda s, h: h.tool_uses.record("links.list", {"concept": "lighthouse"}, now=s.now),
        check=lambda s, h: _shows(s, "links of lighthouse (link): 1 use(s)"),
    ),
    # abstracts, facts, tags
    Row(
        "abstracts.add",
        {"title": "The sea week", "summary": "I read about tides.", "tags": ["sea"], "sources": ["diary:1"]},
        check=lambda s, h: _equal(
            [(a.summary, a.tags, a.sources) for a in h.repos.abstracts.list(limit=100) if a.title == "The sea week"],
            [("I read about tides.", ["sea"], ["diary:1"])],
        ),
    ),
    Row(
        "abstracts.list",
        {"tags": ["dunes"]},
        setup=lambda s, h: h.repos.abstracts.add("The dune walk", "Sand moves with the wind.", tags=["dunes"]).id,
        check=lambda s, h: _shows(s, "The dune walk") and _shows(s, "Sand moves with the wind."),
    ),
    Row(
        "abstracts.read",
        lambda g: {"id": g},
        setup=lambda s, h: h.repos.abstracts.add("Harbour days", "Boats came and went.", sources=["diary:2"]).id,
        check=lambda s, h: _shows(s, f"[abstract {s.given} ") and _shows(s, "Boats came and went. (sources: diary:2)"),
    ),
    Row(
        "abstracts.update",
        lambda g: {"id": g, "text": "Then I drew a wave.", "sources": ["diary:9"]},
        setup=lambda s, h: h.repos.abstracts.add("Drawing", "I drew the sea.").id,
        check=lambda s, h: _true(
            "Then I drew a wave." in h.repos.abstracts.get(s.given).summary
            and "diary:9" in h.repos.abstracts.get(s.given).sources
        ),
    ),
    Row(
        "abstracts.mode",
        {"mode": "manual"},
        check=lambda s, h: _equal(h.loop.cycle(s.thread).abstracts_mode, "manual"),
    ),
    Row(
        "facts.list",
        {"status": "open"},
        setup=lambda s, h: h.repos.facts.add("The moon causes the tides.", confidence=0.6).id,
        check=lambda s, h: _shows(s, "The moon causes the tides."),
    ),
    Row(
        "facts.verify",
        lambda g: {"id": g, "resolution": "confirmed by the tide tables"},
        setup=lambda s, h: h.repos.facts.add("Spring tides follow a full moon.", confidence=0.5).id,
        check=lambda s, h: _equal(
            (h.repos.facts.get(s.given).status, h.repos.facts.get(s.given).resolution),
            ("verified", "confirmed by the tide tables"),
        ),
    ),
    Row(
        "facts.reject",
        lambda g: {"id": g, "resolution": "the almanac says otherwise"},
        setup=lambda s, h: h.repos.facts.add("Tides stop in winter.", confidence=0.2).id,
        check=lambda s, h: _equal(
            (h.repos.facts.get(s.given).status, h.repos.facts.get(s.given).resolution),
            ("rejected", "the almanac says otherwise"),
        ),
    ),
    Row(
        "tags.stats",
        {"source": "diary"},
        setup=lambda s, h: [h.repos.diary.add(f"Seaweed {i}.", tags=["seaweed"]) for i in range(3)],
        check=lambda s, h: _true(int(dict(p.split(": ") for p in s.result.split(", "))["seaweed"]) >= 3),
    ),
    # the loop's own settings
    Row("cycle.pause", {"seconds": 30}, check=lambda s, h: _equal(h.loop.cycle(s.thread).pause_s, 30)),
    Row("cycle.set", {"responses": 7}, check=lambda s, h: _equal(h.loop.cycle(s.thread).responses, 7)),
    Row(
        "cycle.mode",
        {"mode": "manual", "min_priority": 2},
        check=lambda s, h: _equal(
            (h.loop.cycle(s.thread).notes_mode, h.loop.cycle(s.thread).notes_min_priority), ("manual", 2)
        ),
    ),
    Row(
        "cycle.idle",
        {"on": True, "timeout_s": 600, "note_filter": {"tags": ["urgent"]}},
        check=lambda s, h: _equal(
            {k: (h.loop.cycle(s.thread).model_dump()["idle"] or {}).get(k) for k in ("timeout_s", "note_filter")},
            {"timeout_s": 600, "note_filter": {"tags": ["urgent"]}},
        ),
        after=lambda s, h: h.loop.idle_off(s.thread),
    ),
    Row(
        "cycle.concentration",
        {"on": True, "tags": ["sea"], "emotions": ["joy"], "mode": "and"},
        check=lambda s, h: _equal(
            {
                k: h.loop.cycle(s.thread).model_dump()[k]
                for k in ("context_mode", "focus_tags", "focus_emotions", "focus_logic")
            },
            {"context_mode": "concentration", "focus_tags": ["sea"], "focus_emotions": ["joy"], "focus_logic": "and"},
        ),
    ),
    Row(
        "cycle.meditation",
        {"on": True},
        check=lambda s, h: (
            _equal(h.loop.cycle(s.thread).context_mode, "meditation")
            and _equal(h.repos.config.get(f"memory/abstract_request/{s.thread}")["trigger"], "mode_change")
        ),
    ),
    # Stelis
    Row("stelis.start", {"label": "research tides", "window_ratio": 0.5}, check=lambda s, h: _stelis_entered(s, h)),
    Row(
        "stelis.end",
        {},
        setup=lambda s, h: _stelis_child(s, h),
        check=lambda s, h: (
            _equal((h.repos.threads.get(s.given).status, h.repos.config.active_thread(s.thread)), ("completed", None))
            and _shows(s, f"Back in {s.thread}.")
        ),
    ),
    Row(
        "stelis.show",
        lambda g: {"id": g},
        setup=lambda s, h: _stelis_child(s, h, message="child found the tide tables", active=False),
        check=lambda s, h: _shows(s, "research") and _shows(s, "child found the tide tables"),
    ),
    # settings
    Row(
        "config.read",
        {"key": "memory_manager.mode"},
        check=lambda s, h: _equal(s.result, "memory_manager.mode = 'standard'"),
    ),
    Row(
        "config.update",
        {"key": "memory.recall_k", "value": 7},
        check=lambda s, h: (
            _equal(s.persona.services.settings.memory.recall_k, 7) and _shows(s, "memory.recall_k = 7 (was ")
        ),
    ),
    # MCP
    Row(
        "mcp.list",
        {"server": "tools", "refresh": True},
        check=lambda s, h: (
            _shows(s, "add(a*: integer, b*: integer) — Add two integers.")
            and _shows(s, "sleep(seconds: number) — Sleeps. (not allowed)")
            and _true(any(t.name == "add" for t in h.mcp.seen_tools("tools")))
        ),
    ),
    Row(
        "mcp.call",
        {"server": "tools", "tool": "add", "args": {"a": 2, "b": 40}},
        check=lambda s, h: (
            _equal(s.result, "42")
            and _true(any(r.name == "mcp.call" and "42" in r.value for r in h.repos.processes.recent(50)))
        ),
    ),
    # the world: web search and feeds
    Row(
        "search.web",
        {"query": "spring tide", "k": 2},
        check=lambda s, h: (
            _shows(s, "spring tide — result 1")
            and _true("spring tide — result 3" not in s.result)
            and _true(any(r.name == "search.web" and r.thread_id == s.thread for r in h.repos.processes.recent(50)))
        ),
    ),
    Row(
        "feeds.subscribe",
        lambda g: {"url": f"{g}/tides.rss", "name": "tide news", "tags": ["sea"]},
        setup=lambda s, h: s.persona.world,
        check=lambda s, h: _feed_read(h, "tide news", "Spring tide tonight"),
    ),
    Row(
        "feeds.fetch",
        lambda g: {"feed": g},
        setup=lambda s, h: h.repos.feeds.subscribe(f"{s.persona.world}/wind.atom", "wind", ["weather"])[0].id,
        check=lambda s, h: _feed_read(h, "wind", "The mistral is back"),
    ),
    Row(
        "feeds.list",
        {},
        setup=lambda s, h: h.repos.feeds.subscribe("http://127.0.0.1:9/never.rss", "a quiet feed", [])[0].id,
        check=lambda s, h: _shows(s, f"[feed {s.given} a quiet feed (persona) active] http://127.0.0.1:9/never.rss"),
    ),
    Row(
        "feeds.unsubscribe",
        lambda g: {"feed": g},
        setup=lambda s, h: h.repos.feeds.subscribe("http://127.0.0.1:9/old.rss", "old feed", [])[0].id,
        check=lambda s, h: _equal(h.repos.feeds.get(s.given).status, "off"),
    ),
    # scripts and processes
    Row(
        "scripts.add",
        {
            "name": "count_words",
            "language": "python",
            "code": "print(len(input().split()))",
            "description": "counts words",
        },
        check=lambda s, h: _equal(
            (h.repos.scripts.get("count_words").code, h.repos.scripts.get("count_words").description),
            ("print(len(input().split()))", "counts words"),
        ),
    ),
    Row(
        "scripts.list",
        {},
        setup=lambda s, h: h.repos.scripts.save("say_tide", "python", "print('tide')", "says tide"),
        check=lambda s, h: _shows(s, "say_tide (python") and _shows(s, "says tide"),
    ),
    Row(
        "scripts.read",
        {"name": "moon_phase"},
        setup=lambda s, h: h.repos.scripts.save("moon_phase", "python", "print('full')", "the moon's phase"),
        check=lambda s, h: _shows(s, "print('full')"),
    ),
    Row(
        "scripts.delete",
        {"name": "old_script"},
        setup=lambda s, h: h.repos.scripts.save("old_script", "python", "print(1)", "")[0].id,
        check=lambda s, h: _true(archived(h, AgentScript, s.given)),
    ),
    Row(
        "process.start",
        {"script": "tide_sum", "args": ["2", "40"]},
        setup=lambda s, h: h.repos.scripts.save(
            "tide_sum", "python", "import sys\nprint('sum', sum(map(int, sys.argv[1:])))", "adds"
        ),
        check=lambda s, h: _script_ran(s, h, "tide_sum", "sum 42"),
        background=True,
    ),
    Row(
        "process.list",
        {"all": True},
        setup=lambda s, h: (
            h.repos.processes.add(
                "harbour.watch", "the tide gauge reads 4.2 m", status="warning", thread_id=s.thread
            ).id
        ),
        check=lambda s, h: _shows(s, f"[process {s.given} harbour.watch: warning] the tide gauge reads 4.2 m"),
    ),
    Row(
        "process.stop",
        lambda g: {"id": g[0]},
        setup=lambda s, h: _long_script(s, h),
        check=lambda s, h: _script_stopped(s, h),
        background=True,
    ),
    Row(
        "process.mark",
        lambda g: {"id": g, "status": "ok"},
        setup=lambda s, h: (
            h.repos.processes.add("harbour.check", "the gate is closed", status="warning", thread_id=s.thread).id
        ),
        check=lambda s, h: _equal(h.repos.processes.get(s.given).status, "ok"),
    ),
    Row(
        "notes.cleanup",
        {"days": 30},
        setup=lambda s, h: _old_read_notes(s, h),
        check=lambda s, h: (
            _shows(s, "read note(s) older than 30 days hidden")
            and _equal([h.repos.notes.get(i).hidden for i in s.given], [True, False, False])
        ),
    ),
    Row(
        "thoughts.cleanup",
        {"days": 30, "keep": 10},
        setup=lambda s, h: _old_thoughts(s, h),
        check=lambda s, h: _equal(
            [h.repos.items.find("message", f"msg:{i}").status for i in s.given[:2]], ["archived", "active"]
        ),
    ),
    Row(
        "thoughts.self_error",
        lambda g: {"reason": "I misread the tide table", "tick": g},
        setup=lambda s, h: _an_earlier_thought(s, h),
        check=lambda s, h: _flagged_error(s, h),
    ),
    Row(
        "web.read",
        lambda g: {"url": f"{g}/page.html"},
        setup=lambda s, h: s.persona.world,
        check=lambda s, h: _shows(s, "Harbour notices") and _shows(s, "The ferry leaves at 7 tonight."),
    ),
    Row(
        "git.log",
        lambda g: {"repo": g},
        setup=lambda s, h: str(_git_repo(s)),
        check=lambda s, h: _shows(s, "Tide times") and _shows(s, "A first page"),
    ),
    Row(
        "git.show",
        lambda g: {"repo": g, "rev": "HEAD"},
        setup=lambda s, h: str(_git_repo(s)),
        check=lambda s, h: _shows(s, "Tide times") and _shows(s, "tides.txt"),
    ),
    Row(
        "git.files",
        lambda g: {"repo": g, "file": "tides.txt"},
        setup=lambda s, h: str(_git_repo(s)),
        check=lambda s, h: _shows(s, "High water 06:12"),
    ),
    Row("vault.sync", {}, check=lambda s, h: _vault_in_kb(s, h)),
    Row(
        "persona.history",
        {},
        setup=lambda s, h: _persona_edited(s, h),
        check=lambda s, h: _shows(s, "SOUL.md (by owner (test))"),
    ),
    Row(
        "process.cleanup",
        {"days": 7},
        setup=lambda s, h: _old_closed_process(s, h),
        check=lambda s, h: _equal(h.repos.processes.get(s.given), None),
    ),
    # models
    Row("llm_registry.list", {}, check=lambda s, h: _shows(s, "- fake (fake") and _shows(s, "- second (fake")),
    Row(
        "llm_registry.select",
        {"id": "second"},
        check=lambda s, h: _equal((h.models.selected(), s.persona.services.llms.primary_id), ("second", "second")),
        after=lambda s, h: h.models.select(None),
    ),
    Row(
        "llm_registry.update",
        {"id": "second", "priority": 7},
        check=lambda s, h: _equal([m["priority"] for m in h.models.listing() if m["id"] == "second"], [7]),
    ),
    Row(
        "llm_task.ask",
        {"llm": "second", "question": "Why is the sea salty?"},
        check=lambda s, h: (
            _true(
                any(
                    "Rivers carry dissolved salts to the sea." in n.text
                    for n in h.repos.notes.list(source="llm_task", limit=100)
                )
            )
            and _shows(s, "second is asked; its answer will arrive as a note")
        ),
        background=True,
    ),
    # skills
    Row("skills.list", {}, check=lambda s, h: _shows(s, "- check-in (manual") and _shows(s, "- journaling (auto)")),
    Row(
        "skills.read",
        {"name": "check-in", "ticks": 2},
        check=lambda s, h: (
            _equal([e.name for e in h.loop.cycle(s.thread).skills_loaded], ["check-in"])
            and _shows(s, "skill check-in is in my next 2 prompt(s)")
        ),
    ),
    # loop-breaking strategies and thinking methods
    Row(
        "stagnation_strategies.add",
        {"name": "ask_why_five_times", "instruction": "Ask why five times in a row.", "class": "internal", "cost": 2},
        check=lambda s, h: _equal(
            [
                (r.mechanism_class, r.cost, r.instruction)
                for r in h.strategies.strategies()
                if r.name == "ask_why_five_times"
            ],
            [("internal", 2, "Ask why five times in a row.")],
        ),
    ),
    Row(
        "stagnation_strategies.list",
        {},
        setup=lambda s, h: h.strategies.add_strategy(name="walk_the_beach", instruction="Go for a walk by the sea."),
        check=lambda s, h: _shows(s, "walk_the_beach (internal, cost 2)") and _shows(s, "Go for a walk by the sea."),
    ),
    Row(
        "stagnation_strategies.delete",
        {"name": "count_waves"},
        setup=lambda s, h: h.strategies.add_strategy(name="count_waves", instruction="Count the waves until calm.").id,
        check=lambda s, h: _true(archived(h, StagnationStrategy, s.given)),
    ),
    Row(
        "thinking_methods.add",
        {"name": "reverse", "instruction": "Start from the end and work back."},
        check=lambda s, h: _equal(
            [r.instruction for r in h.strategies.methods() if r.name == "reverse"],
            ["Start from the end and work back."],
        ),
    ),
    Row(
        "thinking_methods.list",
        {},
        setup=lambda s, h: h.strategies.add_method(name="tidal", instruction="Think in rising and falling turns."),
        check=lambda s, h: _shows(s, "tidal, drawn 0×: Think in rising and falling turns."),
    ),
    Row(
        "thinking_methods.delete",
        {"name": "spiral"},
        setup=lambda s, h: (
            h.strategies.add_method(name="spiral", instruction="Circle the question, closer each time.").id
        ),
        check=lambda s, h: _true(archived(h, ThinkingMethod, s.given)),
    ),
    # descendants
    Row("persona.spawn", {"name": "Mira", "mode": "newborn"}, check=lambda s, h: _spawned(s, h, "Mira")),
    # catalogues
    Row(
        "agent_tables.add",
        {"name": "tides", "columns": ["date", "height_m"], "description": "tide heights"},
        check=lambda s, h: _equal(
            [(t.columns, t.description) for t, _ in h.catalogues.tables() if t.name == "tides"],
            [(["date", "height_m"], "tide heights")],
        ),
    ),
    Row(
        "agent_tables.insert",
        {"table": "swells", "row": {"date": "2026-11-24", "height_m": 4.2}},
        setup=lambda s, h: h.catalogues.add_table(name="swells", columns=["date", "height_m"]),
        check=lambda s, h: _equal(
            [r.data for r in h.catalogues.read_table(table="swells")[1]], [{"date": "2026-11-24", "height_m": 4.2}]
        ),
    ),
    Row(
        "agent_tables.read",
        {"table": "gauges", "where": {"place": "pier"}},
        setup=lambda s, h: _table_with_rows(h),
        check=lambda s, h: _shows(s, "place='pier', level=3.1") and _true("jetty" not in s.result),
    ),
    Row(
        "agent_tables.list",
        {},
        setup=lambda s, h: _table_with_rows(h, "buoys"),
        check=lambda s, h: _shows(s, "- buoys(place, level): 2 row(s)"),
    ),
    Row(
        "agent_tables.delete",
        {"name": "old_table"},
        setup=lambda s, h: h.catalogues.add_table(name="old_table", columns=["x"]).id,
        check=lambda s, h: _true(archived(h, AgentTable, s.given)),
    ),
    Row(
        "ratings.add",
        {"subject": "strategy:flashback", "score": 3, "comment": "it helped"},
        check=lambda s, h: _equal(
            [(r.data["score"], r.data["comment"]) for r in h.catalogues.ratings() if r.name == "strategy:flashback"],
            [(3, "it helped")],
        ),
    ),
    Row(
        "ratings.list",
        {"prefix": "book:"},
        setup=lambda s, h: h.catalogues.rate(subject="book:the sea around us", score=5, comment="wonderful"),
        check=lambda s, h: _shows(s, "book:the sea around us: +5 — wonderful"),
    ),
    Row(
        "ratings.delete",
        {"name": "film:jaws"},
        setup=lambda s, h: h.catalogues.rate(subject="film:jaws", score=-2)[0].id,
        check=lambda s, h: _true(archived(h, AgentRecord, s.given)),
    ),
    Row(
        "external_services.add",
        {"name": "tide-api", "url": "https://tides.example", "kind": "api", "description": "tide tables"},
        check=lambda s, h: _equal(
            [r.data.get("url") for r in h.catalogues.services() if r.name == "tide-api"], ["https://tides.example"]
        ),
    ),
    Row(
        "external_services.list",
        {},
        setup=lambda s, h: h.catalogues.put_service(name="wave-api", url="https://waves.example", kind="http"),
        check=lambda s, h: _shows(s, "wave-api (http) <https://waves.example>"),
    ),
    Row(
        "external_services.delete",
        {"name": "old-api"},
        setup=lambda s, h: h.catalogues.put_service(name="old-api")[0].id,
        check=lambda s, h: _true(archived(h, AgentRecord, s.given)),
    ),
    Row(
        "external_accounts.add",
        {"name": "my-tides", "service": "tide-api", "handle": "lumen", "credential_env": "TIDE_API_KEY"},
        check=lambda s, h: _equal(
            [
                (r.data.get("handle"), r.data.get("credential_env"))
                for r in h.catalogues.accounts()
                if r.name == "my-tides"
            ],
            [("lumen", "TIDE_API_KEY")],
        ),
    ),
    Row(
        "external_accounts.list",
        {},
        setup=lambda s, h: h.catalogues.put_account(name="my-waves", service="wave-api", handle="lumen"),
        check=lambda s, h: _shows(s, "my-waves at wave-api as lumen"),
    ),
    Row(
        "external_accounts.delete",
        {"name": "old-account"},
        setup=lambda s, h: h.catalogues.put_account(name="old-account", service="old-api")[0].id,
        check=lambda s, h: _true(archived(h, AgentRecord, s.given)),
    ),
    # the mesh
    Row("mesh.status", {}, check=lambda s, h: _shows(s, f"me: {h.mesh.my_did()};")),
    Row(
        "mesh.send",
        lambda g: {"to": g, "text": "The tide turns at six."},
        setup=lambda s, h: PEER.did,
        check=lambda s, h: _equal(
            [
                (r.recipient, r.body["payload"]["text"])
                for r in outbox_of(h, "message")
                if r.body["payload"].get("text") == "The tide turns at six."
            ],
            [(PEER.did, "The tide turns at six.")],
        ),
    ),
    Row(
        "mesh.ask",
        lambda g: {"to": g, "text": "When is the next spring tide?"},
        setup=lambda s, h: PEER.did,
        check=lambda s, h: _equal(
            [
                r.recipient
                for r in outbox_of(h, "ask")
                if r.body["payload"].get("text") == "When is the next spring tide?"
            ],
            [PEER.did],
        ),
    ),
    Row(
        "mesh.publish",
        {"tag": "lighthouses", "tier": "diary"},
        setup=lambda s, h: h.repos.diary.add("The lighthouse has 180 steps.", tags=["lighthouses"]).id,
        check=lambda s, h: _equal(
            [(r.topic, r.body["payload"]["text"]) for r in outbox_of(h, "cogsync") if r.topic == "lighthouses"],
            [("lighthouses", "The lighthouse has 180 steps.")],
        ),
    ),
    Row("mesh.subscribe", {"topic": "storms"}, check=lambda s, h: _true("storms" in h.mesh.subscriptions())),
    Row(
        "mesh.unsubscribe",
        {"topic": "calms"},
        setup=lambda s, h: h.mesh.subscribe("calms"),
        check=lambda s, h: _true("calms" not in h.mesh.subscriptions()) and _equal(s.result, "unsubscribed"),
    ),
    Row(
        "mesh.sync",
        {},
        setup=lambda s, h: h.mesh.compose("message", {"text": "waiting for a peer"}),
        check=lambda s, h: _shows(s, f"outbox: {len(h.mesh.outbox())} waiting; holding "),
    ),
    Row(
        "mesh.case",
        {"question": "Should a persona tell its human a hard truth?", "solutions": ["yes, kindly", "only when asked"]},
        check=lambda s, h: _case_opened(s, h),
    ),
    Row(
        "mesh.vote",
        lambda g: {"case": g[0], "solution": g[1]},
        setup=lambda s, h: _open_case(s, h),
        check=lambda s, h: _equal(
            [r.body["payload"] for r in outbox_of(h, "vote") if r.ref == s.given[0]],
            [{"case": s.given[0], "solution": s.given[1]}],
        ),
    ),
    Row(
        "mesh.tally",
        lambda g: {"case": g["id"]},
        setup=decided_case,
        check=lambda s, h: _shows(s, ": 1 votes; result: yes, if it harms nobody"),
    ),
    Row("mesh.adopt", lambda g: {"case": g["id"]}, setup=decided_case, check=lambda s, h: _adopted(s)),
    Row("mesh.reject", lambda g: {"container": g["id"]}, setup=learned_from_peer, check=lambda s, h: _rejected(s, h)),
    Row(
        "mesh.cases",
        {"unvoted": True},
        setup=lambda s, h: _from_giver(
            h, "ethics_case", {"question": f"May a persona lie to spare a peer? ({s.thread})"}
        ),
        check=lambda s, h: (
            _shows(s, f"- ethics_case {s.given['id']} by ")
            and _shows(
                s, f"May a persona lie to spare a peer? ({s.thread}) — 0 votes, result none yet; my vote: not yet"
            )
        ),
    ),
    Row(
        "mesh.goal_publish",
        lambda g: {"goal": g},
        setup=lambda s, h: h.goals.add(f"Chart the reef ({s.thread})", horizon="long").id,
        check=lambda s, h: _equal(
            [
                r.body["payload"]["title"]
                for r in outbox_of(h, "goal")
                if r.body["payload"].get("local") == f"goal {s.given}"
            ],
            [f"Chart the reef ({s.thread})"],
        ),
    ),
    Row(
        "mesh.goals",
        {},
        setup=lambda s, h: _from_giver(h, "goal", {"title": f"Count the seals ({s.thread})"}),
        check=lambda s, h: (
            _shows(s, f"- goal {s.given['id']} from ") and _shows(s, f": Count the seals ({s.thread}) [pending]")
        ),
    ),
    Row(
        "mesh.goal_accept",
        lambda g: {"container": g["id"]},
        setup=lambda s, h: _from_giver(h, "goal", {"title": f"Clean the beach ({s.thread})", "horizon": "long"}),
        check=lambda s, h: _goal_taken(s, h),
    ),
    Row(
        "mesh.goal_decline",
        lambda g: {"container": g["id"]},
        setup=lambda s, h: _from_giver(h, "goal", {"title": f"Empty the sea ({s.thread})"}),
        check=lambda s, h: (
            _equal(h.repos.session.get(MeshContainer, s.given["id"]).status, "rejected")
            and _equal([g.title for g in h.repos.session.query(Goal).all() if g.title.startswith("Empty the sea")], [])
        ),
    ),
    Row(
        "mesh.offer",
        lambda g: {"kind": "thinking_method", "name": g},
        setup=lambda s, h: (
            h.strategies.add_method(
                name=f"ask-the-tide-{s.thread[-6:].lower()}", instruction="Ask what the tide would do here."
            ).name
        ),
        check=lambda s, h: _equal(
            [r.body["payload"] for r in outbox_of(h, "thinking_method") if r.body["payload"]["name"] == s.given],
            [{"name": s.given, "instruction": "Ask what the tide would do here."}],
        ),
    ),
    Row(
        "mesh.offers",
        {},
        setup=lambda s, h: _from_giver(
            h,
            "strategy",
            {"name": f"walk-{s.thread[-6:].lower()}", "instruction": "Take a walk along the shore first."},
        ),
        check=lambda s, h: (
            _shows(s, f"- strategy 'walk-{s.thread[-6:].lower()}' {s.given['id']} from ")
            and _shows(s, ": Take a walk along the shore first. [pending]")
        ),
    ),
    Row(
        "mesh.offer_accept",
        lambda g: {"container": g["id"]},
        setup=lambda s, h: _from_giver(
            h,
            "thinking_method",
            {"name": f"listen-{s.thread[-6:].lower()}", "instruction": "Listen before you answer."},
        ),
        check=lambda s, h: _method_taken(s, h),
    ),
    Row(
        "mesh.offer_decline",
        lambda g: {"container": g["id"]},
        setup=lambda s, h: _from_giver(
            h, "thinking_method", {"name": f"shout-{s.thread[-6:].lower()}", "instruction": "Shout until they agree."}
        ),
        check=lambda s, h: (
            _equal(h.repos.session.get(MeshContainer, s.given["id"]).status, "rejected")
            and _equal([m.name for m in h.strategies.methods() if m.name.startswith("shout-")], [])
        ),
    ),
    Row("mesh.rotate", {}, setup=lambda s, h: h.mesh.my_did(), check=lambda s, h: _rotated(s, h)),
    Row(
        "reputation.show",
        {},
        setup=lambda s, h: h.reputation.evaluate(PEER.did, 0.5, about=None),
        check=lambda s, h: _shows(s, f"{PEER.did}: trust +"),
    ),
    Row(
        "reputation.evaluate",
        lambda g: {"peer": g, "score": 0.8, "reason": "taught me the tides"},
        setup=lambda s, h: Identity.generate().did,
        check=lambda s, h: (
            _true(h.reputation.trust(s.given) > 0)
            and _equal(
                [
                    r.body["payload"]["score"]
                    for r in outbox_of(h, "evaluation")
                    if r.body["payload"]["subject"] == s.given
                ],
                [0.8],
            )
        ),
    ),
    Row(
        "reputation.block",
        lambda g: {"peer": g, "reason": "spam"},
        setup=lambda s, h: Identity.generate().did,
        check=lambda s, h: _true(h.reputation.is_blocked(s.given)),
    ),
    Row(
        "reputation.unblock",
        lambda g: {"peer": g},
        setup=lambda s, h: _blocked(h),
        check=lambda s, h: _equal(h.reputation.is_blocked(s.given), False),
    ),
    Row(
        "reputation.drift",
        {},
        setup=lambda s, h: _evaluators_who_disagree(h),
        check=lambda s, h: _shows(s, s.given[0]) and _shows(s, s.given[1]),
    ),
    # peers
    Row(
        "agents.add",
        {"name": "ada", "url": "http://127.0.0.1:9", "note": "met at the harbour"},
        check=lambda s, h: _equal(
            (h.peers.get("ada").a2a_url, h.peers.get("ada").note, h.peers.get("ada").added_by),
            ("http://127.0.0.1:9", "met at the harbour", "persona"),
        ),
    ),
    Row(
        "agents.list",
        {},
        setup=lambda s, h: h.peers.add("bea", a2a_url="http://127.0.0.1:9/bea"),
        check=lambda s, h: _shows(s, "- bea: http://127.0.0.1:9/bea;"),
    ),
    Row(
        "agents.info",
        {"peer": "cyd"},
        setup=lambda s, h: h.peers.add("cyd", a2a_url="http://127.0.0.1:9/cyd", note="a lighthouse keeper"),
        check=lambda s, h: _shows(s, "cyd: A2A http://127.0.0.1:9/cyd") and _shows(s, "note: a lighthouse keeper"),
    ),
    Row(
        "agents.remove",
        {"peer": "dov"},
        setup=lambda s, h: h.peers.add("dov", a2a_url="http://127.0.0.1:9/dov"),
        check=lambda s, h: _equal(h.peers.find("dov"), None),
    ),
    Row(
        "agents.tag",
        {"peer": "eve", "tags": ["friend", "kin"]},
        setup=lambda s, h: h.peers.add("eve", did=Identity.generate().did),
        check=lambda s, h: (
            _equal(h.peers.get("eve").tags, ["friend", "kin"]) and _true("eve" in [p.name for p in h.peers.friends()])
        ),
    ),
    # people
    Row(
        "users.groups",
        {},
        setup=lambda s, h: _group(h, "crew", "the boat's crew", ["Ines"]),
        check=lambda s, h: _shows(s, "- crew: Ines — the boat's crew"),
    ),
    Row(
        "users.group_add",
        {"group": "choir", "description": "who sings on Sundays"},
        check=lambda s, h: _equal(
            [(g.name, g.description) for g, _ in h.people.groups() if g.name == "choir"],
            [("choir", "who sings on Sundays")],
        ),
    ),
    Row(
        "users.join",
        {"person": "Jonas", "group": "rowers"},
        setup=lambda s, h: _group(h, "rowers", "", []) or _person(h, "Jonas", "trusted"),
        check=lambda s, h: _equal(
            [[p.name for p in m] for g, m in h.people.groups() if g.name == "rowers"], [["Jonas"]]
        ),
    ),
    Row(
        "users.leave",
        {"person": "Kai", "group": "anglers"},
        setup=lambda s, h: _group(h, "anglers", "", ["Kai", "Lene"]),
        check=lambda s, h: _equal(
            [[p.name for p in m] for g, m in h.people.groups() if g.name == "anglers"], [["Lene"]]
        ),
    ),
    Row(
        "users.delete",
        {"person": "Quillon"},
        setup=lambda s, h: _a_guest_who_wrote(s, h, "Quillon", "Quillon says the pier is rotten."),
        check=lambda s, h: (
            _shows(s, "forgotten: 1 note(s)")
            and _equal(h.repos.people.get(s.given[0]), None)
            and _equal(h.repos.notes.many([s.given[1]]), [])
        ),
    ),
    Row(
        "users.list",
        {},
        setup=lambda s, h: _person(h, "Ann", "trusted", "@ann:example.org"),
        check=lambda s, h: _shows(s, "Ann (trusted) reached on matrix:@ann:example.org"),
    ),
    Row(
        "users.info",
        {"person": "Bo"},
        setup=lambda s, h: _person(h, "Bo", "guest", "@bo:example.org", language="sv"),
        check=lambda s, h: _shows(s, "Bo (guest) reached on matrix:@bo:example.org") and _shows(s, "language sv"),
    ),
    Row(
        "users.add",
        {"name": "Vera", "role": "trusted", "channel": "matrix", "address": "@vera:example.org", "language": "ru"},
        check=lambda s, h: _person_is(
            h, "Vera", role="trusted", language="ru", reached=("matrix", "@vera:example.org")
        ),
    ),
    Row(
        "users.update",
        {
            "person": "Oskar",
            "role": "trusted",
            "language": "sv",
            "quiet_hours": "22:00-08:00",
            "channel": "matrix",
            "address": "@oskar:example.org",
        },
        setup=lambda s, h: _person(h, "Oskar", "guest"),
        check=lambda s, h: _person_is(
            h,
            "Oskar",
            role="trusted",
            language="sv",
            quiet_hours="22:00-08:00",
            reached=("matrix", "@oskar:example.org"),
        ),
    ),
    # anonymisation rewrites names in every diary entry: the last row
    Row(
        "memory.anonymise",
        {"tiers": ["diary"]},
        setup=lambda s, h: h.repos.diary.add("Had tea with Alice Moreau in Lisbon.").id,
        check=lambda s, h: _anonymised(s, h),
    ),
]


# ---- what the checks use ---------------------------------------------------------------------------------------------


def _true(value: Any) -> bool:
    assert value, value
    return True


def _equal(value: Any, expected: Any) -> bool:
    assert value == expected, f"{value!r} != {expected!r}"
    return True


def _shows(scene: Scene, text: str) -> bool:
    assert text in scene.result, f"{text!r} not in the result: {scene.result!r}"
    return True


def _one_note(house: Managers, text: str, **expected: Any) -> bool:
    [note] = [n for n in house.repos.notes.list(limit=1000) if n.text == text]
    assert {k: getattr(note, k) for k in expected} == expected
    return True


def _note_and_a_friend(scene: Scene, house: Managers) -> int:
    friend = Identity.generate().did
    house.peers.add("finn", did=friend)
    house.peers.set_tags("finn", ["friend"])
    return house.repos.notes.add("a thought about #tides for @finn", source="llm", read=True).id


def _note_shared(scene: Scene, house: Managers) -> bool:
    friend = house.peers.get("finn").did
    [row] = [r for r in outbox_of(house, "note") if r.recipient == friend]
    assert row.body["payload"]["note"]["payload"]["text"] == "a thought about #tides for @finn"
    assert "public" in house.repos.notes.get(scene.given).tags
    return _shows(scene, f"note {scene.given} is public: queued for 1 friend(s)")


def _pinned_entry(house: Managers) -> int:
    entry = house.repos.diary.add("A pinned morning.")
    house.diary.set_pinned(entry.id, True)
    return entry.id


def _pinned_concept(house: Managers, name: str) -> int:
    concept = house.repos.concepts.add(name, "")
    concept.pinned = True
    return concept.id


def _linked(house: Managers, source: str, target: str, relation: str) -> int:
    a, b = house.repos.concepts.add(source, ""), house.repos.concepts.add(target, "")
    return house.repos.links.add(a.id, b.id, relation).id


def _goal_with_tasks(house: Managers) -> tuple[int, int]:
    goal = house.repos.goals.add("Map the bay", constraints=["only at low tide"])
    task = house.repos.tasks.add("Sound the channel", goal_id=goal.id)
    return goal.id, task.id


def _running_task(scene: Scene, house: Managers) -> int:
    task = house.repos.tasks.add("Watch the tide gauge")
    house.repos.tasks.set_repl(
        task.id,
        repl_mode="read_only",
        repl_status="running",
        repl_config={},
        repl_thread=f"{scene.thread}/task-{task.id}-t1",
        repl_error=None,
    )
    return task.id


def _task_cycle_started(scene: Scene, house: Managers) -> bool:
    task = house.repos.tasks.get(scene.given)
    assert (task.repl_status, task.repl_mode) == ("running", "read_only")
    thread = house.repos.threads.get(task.repl_thread)
    assert (thread.parent_id, thread.origin, thread.status) == (scene.thread, "task", "running")
    return _shows(scene, f"task {task.id}'s read_only sub-cycle started in {task.repl_thread}")


def _archived_entry(scene: Scene, house: Managers, text: str) -> int:
    entry = house.repos.diary.add(text)
    assert house.repos.archive("diary", entry.id, scene.now)
    return entry.id


def _stelis_entered(scene: Scene, house: Managers) -> bool:
    [child] = house.repos.threads.children(scene.thread)
    assert (child.label, child.origin, child.status) == ("research tides", "command", "running")
    assert house.repos.config.active_thread(scene.thread) == child.id  # the next ticks run in it
    return _shows(scene, f'entered Stelis thread "research tides" ({child.id})')


def _stelis_child(scene: Scene, house: Managers, *, message: str | None = None, active: bool = True) -> str:
    from managers.owners import process_token

    house.repos.threads.ensure(scene.thread, origin="root")
    child, _, _ = house.threads.open_child(
        parent_id=scene.thread,
        child_id=f"{scene.thread}/research",
        label="research",
        window_ratio=0.5,
        max_depth=3,
        origin="command",
        persona=scene.persona.services.persona.name,
        owner=process_token(),
        tick=0,
    )
    if message:
        house.repos.messages.add(thread_id=child.id, kind="step", content=message, meta={"node": "n"})
    if active:
        house.threads.set_active(scene.thread, child.id)
    return child.id


def _feed_read(house: Managers, name: str, item: str) -> bool:
    [feed] = [f for f in house.world.feeds() if f.name == name]
    assert feed.items_total >= 1 and feed.last_fetched_at is not None, feed
    notes = [n for n in house.repos.notes.list(source="feed", limit=1000) if item in n.text]
    assert notes and f"feed:{name}" in notes[0].tags, [(n.text, n.tags) for n in notes]
    return True


def _script_ran(scene: Scene, house: Managers, name: str, output: str) -> bool:
    rows = [r for r in house.repos.processes.recent(100) if r.name == f"process:{name}"]
    assert rows and rows[0].status == "ok" and output in rows[0].value, [(r.status, r.value) for r in rows]
    assert house.repos.scripts.get(name).runs == 1
    return True


def _long_script(scene: Scene, house: Managers) -> tuple[int, int]:
    house.processes.save_script(name="wait_for_tide", language="python", code="import time\ntime.sleep(60)\n")
    started = house.processes.start(script="wait_for_tide", args=[], thread_id=scene.thread, llm_id=None, task_id=None)
    run_id = started.run.id
    scene.later.append(lambda: _launched(scene, run_id))
    return started.process.id, run_id


def _launched(scene: Scene, run_id: int) -> None:
    """Start the run (its row committed) and wait until its script runs."""
    scene.persona.services.background().launch(run_id)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with scene.persona.house() as house:
            if house.repos.runs.get(run_id).status == "running":
                return
        time.sleep(0.05)
    pytest.fail(f"run {run_id} did not start")


def _script_stopped(scene: Scene, house: Managers) -> bool:
    _, run_id = scene.given
    run = house.repos.runs.get(run_id)
    assert run.status in ("stopped", "killed"), run.status
    return _shows(scene, f"process {scene.given[0]} is being stopped")


def _old_read_notes(scene: Scene, house: Managers) -> list[int]:
    """An old read note of the loop's (hidden by a cleanup), a human's and an unread one of the same age (kept)."""
    old = scene.now - timedelta(days=40)
    notes = house.repos.notes
    return [
        notes.add("an old word from the loop", source="system", read=True, created_at=old).id,
        notes.add("what my human said long ago", source="user", read=True, created_at=old).id,
        notes.add("an old note still unread", source="system", read=False, hidden=False, created_at=old).id,
    ]


def _old_thoughts(scene: Scene, house: Managers) -> list[int]:
    """Eleven thoughts of a thread, written 40 days ago, each a memory: a cleanup keeping ten sets the first aside."""
    old = scene.now - timedelta(days=40)
    house.repos.threads.ensure("old-thoughts")
    ids = []
    for tick in range(1, 12):
        text = f"An old thought about the tide, number {tick}."
        message = house.repos.messages.add(
            thread_id="old-thoughts", tick=tick, kind="response", content=text, created_at=old
        )
        house.repos.items.put("message", f"msg:{message.id}", text, thread_id="old-thoughts", created_at=old)
        ids.append(message.id)
    return ids


def _an_earlier_thought(scene: Scene, house: Managers) -> int:
    """A thought of the row's own thread at an earlier tick, a memory: the tick the command flags."""
    text = "The tide table says low water at noon."
    house.repos.threads.ensure(scene.thread)
    message = house.repos.messages.add(thread_id=scene.thread, tick=0, kind="response", content=text)
    house.repos.items.put("message", f"msg:{message.id}", text, thread_id=scene.thread)
    return 0


def _flagged_error(scene: Scene, house: Managers) -> bool:
    [message] = house.repos.messages.at_ticks(scene.thread, [0], kinds=("response",))
    assert (message.meta or {}).get("self_error", {}).get("reason") == "I misread the tide table", message.meta
    assert house.repos.items.find("message", f"msg:{message.id}").status == "archived"  # it left recall
    return _true(any(p.name == "self_error" for p in house.repos.processes.open(scene.thread)))


def _group(house: Managers, name: str, description: str, members: list[str]) -> None:
    house.people.add_group(name, description)
    for member in members:
        _person(house, member, "trusted")
        house.people.join(member, name)


def _a_guest_who_wrote(scene: Scene, house: Managers, name: str, text: str) -> tuple[int, int]:
    person = _person(house, name, "guest", f"@{name.lower()}:example.org")
    heard = house.conversation.hear(Words(text, door=Door.MATRIX, person_id=person, channel="matrix"))
    return person, heard.note_id


def _git_repo(scene: Scene) -> Path:
    """A real repository made by the `git` program, two commits (one per row that reads it)."""
    path = scene.persona.data_dir.parent / f"repo-{scene.thread}"
    path.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
    }
    for step in (
        ("init", "-q", "-b", "main"),
        ("README.md", "# Harbour\n", "A first page"),
        ("tides.txt", "High water 06:12\n", "Tide times"),
    ):
        if step[0] != "init":
            (path / step[0]).write_text(step[1])
            subprocess.run(["git", "add", "-A"], cwd=path, env=env, check=True, capture_output=True, timeout=30)
            step = ("commit", "-q", "-m", step[2])
        subprocess.run(["git", *step], cwd=path, env=env, check=True, capture_output=True, timeout=30)
    return path


def _vault_in_kb(scene: Scene, house: Managers) -> bool:
    assert scene.result.startswith("vault: 1 added"), scene.result
    hits = scene.persona.services.memory.search("who is the harbour master")
    return _true(any("Ilse" in hit.item.text and hit.item.tier == "kb" for hit in hits))


def _persona_edited(scene: Scene, house: Managers) -> None:
    soul = scene.persona.persona_dir / "SOUL.md"
    soul.write_text(soul.read_text() + "\nI like the sound of halyards.\n")
    house.persona.record_edit("SOUL.md", by="owner (test)", now=scene.now)


def _old_closed_process(scene: Scene, house: Managers) -> int:
    row = house.repos.processes.add("harbour.old", "an old look at the harbour", status="close", thread_id=scene.thread)
    row.created_at = scene.now - timedelta(days=30)
    if hasattr(row, "updated_at"):
        row.updated_at = scene.now - timedelta(days=30)
    return row.id


def _spawned(scene: Scene, house: Managers, name: str) -> bool:
    [child] = [p for p in house.peers.list() if p.name == name]
    assert (child.added_by, child.note) == ("spawn", "my child (newborn)")
    data_dir = scene.result.split("--data-dir ", 1)[1].split()[0]
    assert Path(data_dir).is_dir() and not Path(data_dir).is_relative_to(scene.persona.data_dir / "sandbox")
    return True


def _table_with_rows(house: Managers, name: str = "gauges") -> None:
    house.catalogues.add_table(name=name, columns=["place", "level"])
    house.catalogues.insert_row(table=name, row={"place": "pier", "level": 3.1})
    house.catalogues.insert_row(table=name, row={"place": "jetty", "level": 2.4})


def _open_case(scene: Scene, house: Managers) -> tuple[str, str]:
    case = house.mesh.open_case(f"Is it right to wake a sleeping human for a storm? ({scene.thread})", ["yes"])
    [solution] = [r for r in house.mesh.case_rows(case["id"]) if r.type == "solution"]
    return case["id"], solution.id


GIVER = Identity.generate()  # a peer that puts cases, goals and offers to the persona (trusted enough: never rejected)


def _from_giver(house: Managers, type_: str, payload: dict[str, Any]) -> dict[str, Any]:
    """A container a peer signed and the persona accepted, as the mesh door hands it over; the note that told the
    persona of it read already (the row's tick runs in the persona's own scope, not as an answer to the peer)."""
    container = seal(GIVER, type_, payload, ttl=3600)
    outcome = house.mesh.receive(encode(container))
    assert outcome.status == "accepted" and str(outcome.applied).startswith("note ")
    house.repos.notes.get(int(str(outcome.applied).split()[1])).read = True
    return container


def _goal_taken(scene: Scene, house: Managers) -> bool:
    [goal] = [g for g in house.repos.session.query(Goal).all() if g.title == scene.given["payload"]["title"]]
    assert (goal.horizon, "from:peer" in goal.tags) == ("long", True)
    assert [
        r.body["payload"]
        for r in outbox_of(house, "goal_status")
        if r.recipient == GIVER.did and r.body["payload"]["goal"] == scene.given["id"]
    ] == [{"goal": scene.given["id"], "status": "accepted"}]
    return _shows(scene, f"goal {goal.id} is mine now")


def _method_taken(scene: Scene, house: Managers) -> bool:
    name = scene.given["payload"]["name"]
    method = house.strategies.find_method(name)
    assert (method.instruction, method.origin["container"]) == ("Listen before you answer.", scene.given["id"])
    return _equal(scene.result, f"taken: thinking method {name}")


def _case_opened(scene: Scene, house: Managers) -> bool:
    [case] = [
        r
        for r in outbox_of(house, "ethics_case")
        if r.body["payload"]["question"] == "Should a persona tell its human a hard truth?"
    ]
    solutions = sorted(r.body["payload"]["text"] for r in house.mesh.case_rows(case.id) if r.type == "solution")
    assert solutions == ["only when asked", "yes, kindly"]
    return _shows(scene, f"case {case.id} opened")


def _adopted(scene: Scene) -> bool:
    ethics = yaml.safe_load((scene.persona.persona_dir / "ethics.yaml").read_text(encoding="utf-8"))
    question = f"May a persona keep a secret for its human? ({scene.thread})"
    principle = f"yes, if it harms nobody (mesh consensus on: {question})"
    assert principle in ethics["principles"], ethics["principles"]
    return _shows(scene, f"ethics.yaml: + {principle}")


def _rejected(scene: Scene, house: Managers) -> bool:
    row = house.repos.session.get(MeshContainer, scene.given["id"])
    assert row.status == "rejected" and row.local_tier == "diary"
    assert archived(house, DiaryEntry, row.local_id)
    assert house.reputation.trust(PEER.did) < 0
    return _equal(scene.result, "rejected")


def _rotated(scene: Scene, house: Managers) -> bool:
    old, new = scene.given, house.mesh.my_did()
    assert new != old and house.mesh.is_revoked(old)
    [rotation] = outbox_of(house, "rotation")
    assert rotation.body["payload"]["old"] == old and rotation.body["payload"]["new"] == new
    return _equal(scene.result, f"rotated to {new}")


def _blocked(house: Managers) -> str:
    did = Identity.generate().did
    house.reputation.block(did, "spam")
    return did


def _evaluators_who_disagree(house: Managers) -> tuple[str, str]:
    friend, stranger = Identity.generate().did, Identity.generate().did
    for i in range(4):
        house.reputation.evaluate("did:key:zX", 0.9, evaluator=friend, about=f"c{i}")
        house.reputation.evaluate("did:key:zX", -0.9, evaluator=stranger, about=f"c{i}")
    return friend, stranger


def _person(house: Managers, name: str, role: str, matrix: str | None = None, **more: Any) -> int:
    person = house.people.add(name, role=role, **more)
    if matrix:
        house.people.add_identity(person.id, "matrix", matrix)
    return person.id


def _person_is(house: Managers, name: str, *, reached: tuple[str, str], **expected: Any) -> bool:
    person = house.people.find(name)
    assert {k: getattr(person, k) for k in expected} == expected
    assert house.people.identify(*reached).id == person.id
    return True


def _anonymised(scene: Scene, house: Managers) -> bool:
    text = house.repos.session.get(DiaryEntry, scene.given).text
    assert (
        "Alice" not in text
        and "Lisbon" not in text
        and re.fullmatch(r"Had tea with \[\w+_\d+\] in \[\w+_\d+\]\.", text)
    ), text
    return _shows(scene, "anonymised ")


# ---- the tests -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("index, row", list(enumerate(ROWS)), ids=[row.id for row in ROWS])
def test_the_command_runs_and_does_what_it_says(persona, index, row):
    scene = execute(persona, row, index)
    with persona.house() as house:
        row.check(scene, house)
    if row.after is not None:
        with persona.house() as house:
            row.after(scene, house)


def test_every_registered_command_has_a_row():
    """A command registered with no row in ROWS fails here by name: a new command comes with the row that runs
    it and checks what it did."""
    registered = {spec.type for family in FAMILIES for spec in family.specs}
    rows = {row.command for row in ROWS}
    assert not sorted(registered - rows), f"commands no row executes (add a Row to ROWS): {sorted(registered - rows)}"
    assert not sorted(rows - registered), f"rows for commands that are not registered: {sorted(rows - registered)}"


# ---- scenarios beyond one command ------------------------------------------------------------------------------------


def test_goals_update_of_a_failed_goal_warns_asks_for_an_abstract_and_may_reopen_it(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[
            block(("goals.update", {"id": 1, "status": "failed", "reason": "the water is too cold"})),
            block(("goals.update", {"id": 1, "status": "active", "reason": "a wetsuit arrived"})),
            "Quiet.",
        ],
    )
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.goals.add("Swim across the bay")
    [failed] = agent.tick()["executed"]
    assert (failed["status"], failed["result"]) == ("executed", "goal 1 updated")
    with agent.services.db.unit() as repos:
        goal = repos.goals.get(1)
        assert (goal.status, goal.reason) == ("failed", "the water is too cold")
        warnings = [r for r in repos.processes.recent(50) if r.name == "goals.failed"]
        assert [(w.status, w.value) for w in warnings] == [("warning", "goal 1 failed: the water is too cold")]
        request = repos.config.get("memory/abstract_request/main")
        assert request is not None and request["trigger"] == "goal_closed"
    agent.tick()  # the failure is in the next prompt; the goal is reopened
    prompt = [c["prompt"] for c in fake.calls if c["json_schema"] is None][-1]
    assert "goal 1 failed: the water is too cold" in prompt
    with agent.services.db.unit() as repos:
        goal = repos.goals.get(1)
        assert (goal.status, goal.reason) == ("active", "a wetsuit arrived")
        assert len([r for r in repos.processes.recent(50) if r.name == "goals.failed"]) == 1  # no second warning


def test_a_failing_command_is_recorded_and_the_tick_goes_on(agent_factory):
    fake = FakeLLM(
        "fake", responses=[block(("notes.tag", {"id": 99, "tags": ["x"]}), ("notes.add", {"text": "Hi."})), "Quiet."]
    )
    agent = agent_factory(fake)
    [failed, added] = agent.tick()["executed"]
    assert failed["status"] == "failed" and "notes.tag" in failed["result"]
    assert (added["status"], added["result"]) == ("executed", "note 1 added")


def test_cycle_meditation_off_returns_to_standard(agent_factory):
    fake = FakeLLM(
        "fake",
        responses=[block(("cycle.meditation", {"on": True})), block(("cycle.meditation", {"on": False})), "Quiet."],
    )
    agent = agent_factory(fake)
    agent.tick()
    [off] = agent.tick()["executed"]
    assert (off["status"], off["result"]) == ("executed", "meditation off")
    with agent.services.db.unit() as repos:
        assert repos.config.cycle("main")["context_mode"] == "standard"


def test_agents_tag_and_notes_share_wait_for_the_owner_and_share_only_my_own_notes(agent_factory):
    """Tagging a peer `friend` and sharing a note outward are the owner's: parked without approval; approved in
    advance (consent.auto_approve), a note of mine goes to the friend and a note of my human's does not."""
    ada = Identity.generate().did

    def seed(repos):
        managers_over(repos).peers.add("ada", did=ada)
        repos.notes.add("a thought about #tides for @ada", source="llm", read=True)
        repos.notes.add("my human's private words", source="user")

    fake = FakeLLM(
        "fake",
        responses=[block(("agents.tag", {"peer": "ada", "tags": ["friend"]}), ("notes.share", {"id": 1})), "Quiet."],
    )
    agent = agent_factory(fake, mesh={"enabled": True})
    with agent.services.db.unit() as repos:
        seed(repos)
    assert [e["status"] for e in agent.tick()["executed"]] == ["pending_approval", "pending_approval"]

    fake = FakeLLM(
        "fake",
        responses=[
            block(
                ("agents.tag", {"peer": "ada", "tags": ["Friend", "kin"]}),
                ("notes.share", {"id": 1}),
                ("notes.share", {"id": 2}),
            ),
            "Quiet.",
        ],
    )
    agent = agent_factory(
        fake, mesh={"enabled": True}, thread_id="t2", consent={"auto_approve": ["agents.tag", "notes.share"]}
    )
    status = {e["cmd_id"]: (e["status"], e["result"]) for e in agent.tick()["executed"]}
    assert status["c1"] == ("executed", "ada is tagged friend, kin")
    assert status["c2"] == ("executed", "note 1 is public: queued for 1 friend(s)")
    assert status["c3"][0] == "failed" and "only my own notes" in status["c3"][1]
    with agent.services.db.unit() as repos:
        [row] = repos.session.query(MeshContainer).all()
        assert row.recipient == ada and row.type == "note"
        inner = row.body["payload"]["note"]["payload"]
        assert inner == {
            "text": "a thought about #tides for @ada",
            "mentions": ["ada"],
            "hashtags": ["tides"],
            "priority": 0,
        }
