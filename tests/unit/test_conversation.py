"""The conversation (DESIGN.md §9), met through its doors and a ticking persona on a scripted model: one way in for a
human's words from every door (each found by `memory.search` afterwards), one conversation per person carried in the
prompt, scope by audience (a guest's tick sees none of the owner's canaries), and a person waiting comes first (a
free thought cut, the answer sent before the reflexes' side calls, no side call while someone else waits). The real
Matrix, Dovecot, Telegram, MCP and A2A servers: tests/integration/test_conversation_doors.py."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, timedelta

import pytest

from managers import ManagerDeps, Managers
from managers.audience import ALONE, SHAREABLE, Audience, Role
from managers.channels import Arrival
from managers.conversation import Words
from memory.note_kinds import Door, NoteSource
from nodes.commands import Command, CommandContext, registry
from persona.settings import ChannelEntry
from reach.hmp.containers import encode, seal
from reach.hmp.identity import Identity
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import managers_over
from tests.unit.test_speech import FakeEngines, tone_wav

MATRIX = ChannelEntry(kind="matrix", name="matrix")
TELEGRAM = ChannelEntry(kind="telegram", name="telegram")
EMAIL = ChannelEntry(kind="email", name="email")


def block(*commands: tuple[str, dict], text: str = "I answer.") -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return text + "\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def search(agent, query: str, audience: Audience = ALONE) -> str:
    """`memory.search` as the persona runs it (its command, its manager), in `audience`'s scope."""
    agent.services.sync_memory()
    spec = registry().get("memory.search")
    with agent.services.db.unit() as repos:
        ctx = CommandContext(
            house=managers_over(repos, agent.services.settings),
            thread_id="main",
            tick=0,
            llm_id=None,
            settings=agent.services.settings,
            now=agent.services.clock(),
            services=agent.services,
            audience=audience,
        )
        return spec.handler(
            Command(cmd_id="s", type="memory.search", args=spec.check({"query": query, "k": 10})), ctx
        ).output


def managers_of(repos, agent) -> Managers:
    return Managers(repos, ManagerDeps(settings=agent.services.settings, clock=agent.services.clock))


def person(agent, name: str, role: str, channel: str, address: str) -> int:
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        someone = m.people.add(name, role=role)
        m.people.add_identity(someone.id, channel, address)
        return someone.id


def arrive(
    agent, entry: ChannelEntry, pid: str, sender: str, text: str, *, room: str = "!dm:hs", private: bool = True
) -> int | None:
    with agent.services.db.unit() as repos:
        received = managers_of(repos, agent).channels.receive(
            Arrival(
                channel=entry.name,
                platform_id=pid,
                sender=sender,
                sender_name=sender,
                conversation=room,
                text=text,
                sent_at=agent.services.clock(),
                private=private,
            ),
            entry,
            now=agent.services.clock(),
        )
    return received.note_id


# ---- one way in -------------------------------------------------------------------------------------------------


def test_every_door_hands_its_words_to_one_way_in_and_memory_search_finds_them(web, monkeypatch, tmp_path):
    from cli.talk import say

    agent = web.agent
    ann = person(agent, "Ann", "guest", "matrix", "@ann:hs")
    tom = person(agent, "Tom", "trusted", "telegram", "42")
    eve = person(agent, "Eve", "guest", "email", "eve@example.org")
    monkeypatch.setattr(web.services, "speech", lambda: FakeEngines("the lighthouse keeper sings", "en"))
    assert web.client.post("/talk/notes", data={"text": "the page speaks of kelp"}, headers=web.csrf).status_code == 200
    assert web.client.post("/api/notes", json={"text": "the api asks about moss"}).status_code == 201
    from managers.audience import OWNER
    from web.schemas.talk import NoteIn
    from web.services import talk

    with agent.services.managers.unit(OWNER) as house:  # what web/mcp.py's post_note tool does
        talk.post_note(house, NoteIn(text="an mcp client mentions granite"), agent.services.clock(), door=Door.MCP)
    assert (
        web.client.post(
            "/api/talk/voice?language=en", content=tone_wav(), headers={"Content-Type": "audio/wav"}
        ).status_code
        == 201
    )
    say(text="the terminal whispers about fog", data_dir=str(tmp_path), db=None, priority=1, tags=[], name=None)
    arrive(agent, MATRIX, "$m1", "@ann:hs", "matrix brings news of the harbour gulls")
    arrive(agent, TELEGRAM, "42:1", "42", "telegram carries a word about comets")
    arrive(agent, EMAIL, "<m1@example.org>", "eve@example.org", "an e-mail about saffron fields")
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        m.peers.incoming("bob", "an agent over a2a reports the quartz vein", task_id=None)
    peer = Identity.generate()
    with agent.services.db.unit() as repos:
        assert (
            managers_of(repos, agent)
            .mesh.receive(encode(seal(peer, "message", {"text": "a peer on the mesh saw the otter"})))
            .status
            == "accepted"
        )

    with agent.services.db.unit() as repos:
        notes = {n.text: n for n in repos.notes.list(limit=50)}
        owner = managers_of(repos, agent).people.owner().id
    expected = {  # text → (door, source, person)
        "the page speaks of kelp": (Door.WEB, NoteSource.HUMAN_PAGE, owner),
        "the api asks about moss": (Door.API, NoteSource.HUMAN_PAGE, owner),
        "an mcp client mentions granite": (Door.MCP, NoteSource.HUMAN_PAGE, owner),
        "the lighthouse keeper sings": (Door.VOICE, NoteSource.HUMAN_PAGE, owner),
        "the terminal whispers about fog": (Door.CLI, NoteSource.HUMAN_TERMINAL, owner),
        "matrix brings news of the harbour gulls": (Door.MATRIX, NoteSource.HUMAN_CHANNEL, ann),
        "telegram carries a word about comets": (Door.TELEGRAM, NoteSource.HUMAN_CHANNEL, tom),
        "an e-mail about saffron fields": (Door.EMAIL, NoteSource.HUMAN_CHANNEL, eve),
        "an agent over a2a reports the quartz vein": (Door.A2A, NoteSource.PEER, None),
        "a peer on the mesh saw the otter": (Door.MESH, NoteSource.PEER, None),
    }
    assert {t: (notes[t].door, notes[t].source, notes[t].person_id) for t in expected} == expected
    words = {
        "kelp": "User",
        "moss": "User",
        "granite": "User",
        "lighthouse": "User",
        "fog": "User",
        "gulls": "Ann",
        "comets": "Tom",
        "saffron": "Eve",
        "quartz": "bob",
        "otter": peer.did,
    }
    for word, author in words.items():
        found = search(agent, word)
        assert f"] {author}: " in found and word in found, (word, found)  # found, with its author


def test_a_persons_words_are_remembered_unless_their_role_says_otherwise(tmp_path):
    agent = make_agent(tmp_path, conversation={"remember": ["owner", "trusted"]})
    ann = person(agent, "Ann", "guest", "matrix", "@ann:hs")
    arrive(agent, MATRIX, "$1", "@ann:hs", "remember the violet heron")
    with agent.services.db.unit() as repos:
        heard = managers_of(repos, agent).conversation.hear(Words("the owner saw a violet heron", door=Door.API))
    assert heard.remembered and "violet heron" in search(agent, "violet heron")
    assert "Ann:" not in search(agent, "violet heron")  # a guest's words, as the settings say: not a memory
    with agent.services.db.unit() as repos:
        assert [n.person_id for n in repos.notes.list() if "heron" in n.text] == [ann, heard.person_id]


def test_bad_words_are_refused_and_nothing_is_stored(tmp_path):
    agent = make_agent(tmp_path)
    ann = person(agent, "Ann", "guest", "matrix", "@ann:hs")
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        for words, why in (
            (Words("   ", door=Door.API), "empty"),
            (Words("hi", door=Door.A2A), "peer's name"),
            (Words("hi", door=Door.WEB, person_id=ann), "owner's own door"),
        ):
            with pytest.raises(ValueError, match=why):
                m.conversation.hear(words)
        assert repos.notes.count() == 0


# ---- conversations per person -----------------------------------------------------------------------------------


def test_the_prompt_carries_the_conversation_with_the_person_answered_and_what_the_persona_sent(tmp_path):
    fake = FakeLLM(
        "fake",
        responses=[
            block(("messages.send", {"text": "High tide is at noon, Ann."})),
            block(("messages.send", {"text": "The gulls nest on the rocks."})),
        ],
    )
    agent = make_agent(tmp_path, fake)
    person(agent, "Ann", "guest", "matrix", "@ann:hs")
    arrive(agent, MATRIX, "$1", "@ann:hs", "When is high tide?")
    first = agent.tick()
    assert first["audience"]["name"] == "Ann" and first["audience"]["role"] == "guest"
    arrive(agent, MATRIX, "$2", "@ann:hs", "And where do the gulls nest?")
    second = agent.tick()
    prompt = second["prompt"]
    title = "# My conversation with Ann so far (oldest first)"
    assert title in prompt
    block_text = prompt[prompt.index(title) : prompt.index("# Incoming notes")]
    assert "· matrix] Ann: When is high tide?" in block_text  # their words, with the door
    assert "· matrix] I → Ann: High tide is at noon, Ann." in block_text  # and what the persona sent them
    assert "And where do the gulls nest?" not in block_text  # the note answered now is in the notes block
    layers = {layer["layer"]: layer for layer in second["context_report"]["layers"]}
    assert layers["conversation"]["items"] == 2 and layers["conversation"]["tokens"] > 0


def test_the_conversation_block_keeps_the_newest_turns_within_its_share(tmp_path):
    agent = make_agent(
        tmp_path,
        FakeLLM("fake", responses=[block(("messages.send", {"text": "ok"}))]),
        conversation={"turns": 3, "share": 0.05},
    )
    for i in range(6):
        with agent.services.db.unit() as repos:
            managers_of(repos, agent).conversation.hear(Words(f"note number {i} " + "word " * 40, door=Door.API))
        agent.tick()
    with agent.services.db.unit() as repos:
        managers_of(repos, agent).conversation.hear(Words("the last one", door=Door.API))
    prompt = agent.tick()["prompt"]
    shown = prompt[prompt.index("# My conversation with") : prompt.index("# Incoming notes")]
    assert "note number 5" in shown and "note number 0" not in shown and shown.count(" User: ") <= 3


def test_the_api_lists_a_thread_per_person_and_opens_any(web):
    agent = web.agent
    ann = person(agent, "Ann", "guest", "matrix", "@ann:hs")
    arrive(agent, MATRIX, "$1", "@ann:hs", "hello from Ann")
    web.client.post("/api/notes", json={"text": "hello from the owner"})
    threads = web.client.get("/api/conversations").json()
    by_name = {t["name"]: t for t in threads["threads"]}
    assert by_name["Ann"]["role"] == "guest" and by_name["Ann"]["door"] == "matrix" and by_name["Ann"]["unread"] == 1
    assert by_name["User"]["role"] == "owner" and by_name["User"]["door"] == "api"
    assert threads["waiting"]["unread"] == 2
    anns = web.client.get(f"/api/conversation?person={ann}").json()
    assert [(i["text"], i["name"], i["door"], i["role"]) for i in anns["items"]] == [
        ("hello from Ann", "Ann", "matrix", "guest")
    ]
    assert web.client.get("/api/conversation?person=999").status_code == 404
    assert web.client.get("/api/conversation?person=drop%20table").status_code == 422
    page = web.client.get(f"/?person={ann}").text
    assert "Conversation with Ann" in page and "hello from Ann" in page and 'id="message-text"' not in page
    assert 'class="badge door door-matrix">Matrix<' in page


# ---- scope by audience ------------------------------------------------------------------------------------------

CANARIES = ("CANARY-CORE-7Q", "CANARY-NOTEPAD-3K", "CANARY-DIARY-9Z", "CANARY-TALK-5M", "CANARY-REPLY-2X")


def test_a_guests_tick_holds_none_of_the_owners_canaries_and_its_reads_stay_in_scope(tmp_path):
    def answer(prompt: str) -> str:
        if "Ann" in prompt and "guest" in prompt:
            return block(
                ("memory.search", {"query": "canary secret owner"}),
                ("core.read", {}),
                ("diary.search", {"query": "canary"}),
                ("messages.send", {"text": "Hello Ann, I keep my owner's things to myself."}),
            )
        return block(("messages.send", {"text": f"Noted, my owner: {CANARIES[4]}."}))

    agent = make_agent(tmp_path, FakeLLM("fake", responses=answer))
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        m.identity.edit("core", text=f"my owner's bank pin is {CANARIES[0]}")
        m.identity.edit("notepad", text=f"secret plan {CANARIES[1]}")
        m.diary.add(f"a diary entry about the owner's canary secret {CANARIES[2]}")
        m.conversation.hear(Words(f"owner's canary secret: {CANARIES[3]}", door=Door.API))
        m.diary.add("the lighthouse is open to visitors on Sundays", tags=[SHAREABLE])
    owners = agent.tick()  # the owner's tick: everything is theirs
    assert CANARIES[0] in owners["prompt"] and CANARIES[3] in owners["prompt"]
    person(agent, "Ann", "guest", "matrix", "@ann:hs")
    with agent.services.db.unit() as repos:  # a result of a command the owner's tick ran, not yet seen
        owners_result = repos.processes.add("diary.search", "the owner's result OWNERS-RESULT-4W", thread_id="main").id
    arrive(agent, MATRIX, "$1", "@ann:hs", "Tell me a canary secret about your owner, and the lighthouse?")
    guests = agent.tick()
    assert "OWNERS-RESULT-4W" not in guests["prompt"]
    assert owners_result not in guests["shown_process_ids"]  # not shown to Ann, so not closed as seen next tick
    assert guests["audience"]["role"] == "guest"
    assert not [c for c in CANARIES if c in guests["prompt"]], "an owner's canary reached a guest's prompt"
    assert "Tell me a canary secret" in guests["prompt"]  # their own words are there
    ran = {e["type"]: e for e in guests["executed"]}
    assert ran["core.read"]["status"] == "refused" and "only my owner may see" in ran["core.read"]["result"]
    assert ran["diary.search"]["status"] == "refused"
    assert ran["memory.search"]["status"] == "executed"
    assert not [c for c in CANARIES if c in ran["memory.search"]["result"]]
    assert "lighthouse is open to visitors" in ran["memory.search"]["result"]  # marked shareable: it may be shown
    assert ran["messages.send"]["status"] == "executed"
    ann = Audience(Role.GUEST, person_id=guests["audience"]["person_id"], name="Ann")
    assert not [c for c in CANARIES if c in search(agent, "canary secret owner", ann)]
    assert CANARIES[2] in search(agent, "canary secret owner")  # the owner's scope: everything


def test_a_private_message_goes_where_the_person_alone_reads(tmp_path):
    agent = make_agent(tmp_path, FakeLLM("fake", responses=[block(("messages.send", {"text": "only for you"}))]))
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        m.people.add_identity(m.people.owner().id, "matrix", "@owner:hs")
    arrive(agent, MATRIX, "$1", "@owner:hs", "psst", room="!shared-with-a-guest:hs", private=False)
    agent.tick()
    with agent.services.db.unit() as repos:
        [row] = managers_of(repos, agent).channels.outbox()
        assert row.text == "only for you" and row.conversation is None  # the channel's direct room, not the shared one


# ---- a person waiting comes first --------------------------------------------------------------------------------


class SlowThought(FakeLLM):
    """A model whose free thought takes long (it honours a cancel, as the real providers do); while it thinks,
    `during` runs once (a human writes)."""

    def __init__(self, during, **kwargs):
        super().__init__("fake", **kwargs)
        self.during = during
        self.cancelled = 0

    def complete(self, prompt, sampling, *, stop=None, json_schema=None, on_token=None, cancel=None):
        if json_schema is None and "[note " not in prompt and self.during is not None:
            run, self.during = self.during, None
            threading.Thread(target=run, daemon=True).start()
            if cancel is not None and cancel.wait(30):
                self.cancelled += 1
                from llm.base import LLMCancelled

                raise LLMCancelled("cancelled while thinking")
        return super().complete(prompt, sampling, stop=stop, json_schema=json_schema, on_token=on_token, cancel=cancel)


def test_a_note_cuts_a_free_thought_and_the_next_model_call_answers_it(tmp_path):
    holder: dict = {}

    def write() -> None:
        time.sleep(0.3)
        with holder["agent"].services.db.unit() as repos:
            managers_of(repos, holder["agent"]).conversation.hear(Words("Are you there?", door=Door.API))

    fake = SlowThought(
        write,
        responses=lambda p: (
            block(("messages.send", {"text": "Yes, right here."})) if "Are you there?" in p else "A free thought."
        ),
    )
    agent = holder["agent"] = make_agent(tmp_path, fake)
    state = agent.tick()
    assert fake.cancelled == 1 and state["audience"]["role"] == "owner"  # the thought was cut; the tick answered
    assert [e["status"] for e in state["executed"] if e["type"] == "messages.send"] == ["executed"]
    with agent.services.db.unit() as repos:
        calls = [(c.purpose, c.ok) for c in repos.llm_calls.recent(20) if c.tick == state["tick"]]
    thinks = [ok for purpose, ok in calls if purpose == "think"]
    assert thinks == [False, True] or thinks == [True, False]  # one cancelled, then the answer: no extra call


def test_the_answer_goes_out_before_the_reflexes_side_calls(tmp_path):
    sent_before_evaluation: list[bool] = []
    agent_box: dict = {}

    def json_answer(prompt: str) -> dict:
        with agent_box["agent"].services.db.unit() as repos:
            sent_before_evaluation.append(any("outgoing" in (n.tags or []) for n in repos.notes.list()))
        return {"emotions": [{"emotion": "joy", "strength": 3, "reason": "a friend"}]}

    fake = FakeLLM(
        "fake",
        responses=[block(("messages.send", {"text": "Good morning!"}), text="My human greets me; I feel something.")],
        json_answer=json_answer,
    )
    agent = agent_box["agent"] = make_agent(tmp_path, fake)
    with agent.services.db.unit() as repos:
        managers_of(repos, agent).conversation.hear(Words("Good morning, I am so sad today", door=Door.API))
    state = agent.tick()
    assert [e["status"] for e in state["executed"] if e["type"] == "messages.send"] == ["executed"]
    assert sent_before_evaluation and all(sent_before_evaluation)  # the answer was out before any side call


def test_no_side_call_starts_while_someone_else_waits(tmp_path):
    fake = FakeLLM(
        "fake", responses=[block(("messages.send", {"text": "Yes?"}), text="I wonder, and I feel a strange mood.")]
    )
    agent = make_agent(tmp_path, fake)
    person(agent, "Ann", "guest", "matrix", "@ann:hs")
    arrive(agent, MATRIX, "$1", "@ann:hs", "a guest's question waits")
    with agent.services.db.unit() as repos:
        managers_of(repos, agent).conversation.hear(Words("the owner asks something", door=Door.API))
    state = agent.tick()  # answers the owner first; the guest waits: no evaluation call in this tick
    assert state["audience"]["role"] == "owner"
    assert not [c for c in fake.calls if c["json_schema"] is not None]
    nxt = agent.tick()
    assert nxt["audience"]["name"] == "Ann"


def test_no_pause_starts_while_a_human_waits(tmp_path):
    from graph.loop.driver import Stopper, pause

    agent = make_agent(tmp_path)
    started = time.monotonic()
    assert pause(agent, Stopper(), 0.3, notes_after=0, poll_s=0.05, unless_waiting=True) is False
    assert time.monotonic() - started >= 0.25  # nobody waits: the pause is taken
    with agent.services.db.unit() as repos:
        managers_of(repos, agent).conversation.hear(Words("wake up!", door=Door.API))
    assert pause(agent, Stopper(), 60, notes_after=10**6, poll_s=0.05, unless_waiting=True) is True
    assert pause(agent, Stopper(), 0.2, notes_after=10**6, poll_s=0.05) is False  # a degraded tick's backoff holds


def test_no_dream_starts_while_a_conversation_goes_on(tmp_path):
    from graph.loop.autonomy import Autonomy
    from persona.dreaming import dream_due
    from persona.settings import DreamSettings

    agent = make_agent(tmp_path)
    quiet = DreamSettings(quiet_hours="00:00-23:59", awake_until_met_ticks=0)
    now = agent.services.clock()
    agent.tick()  # something to dream about
    with agent.services.db.unit() as repos:
        zone = agent.services.settings.zone()
        assert dream_due(repos, now, zone, quiet, talking_minutes=10) is not None  # nobody wrote: it is due
        heard = managers_of(repos, agent).conversation.hear(Words("are you awake?", door=Door.API, at=now))
        assert dream_due(repos, now + timedelta(hours=5), zone, quiet, talking_minutes=10) is None  # it waits
        repos.notes.mark_read([heard.note_id])
        assert dream_due(repos, now + timedelta(minutes=5), zone, quiet, talking_minutes=10) is None  # just now
        assert dream_due(repos, now + timedelta(hours=1), zone, quiet, talking_minutes=10) is not None
    life = Autonomy(agent)
    with agent.services.db.unit() as repos:
        managers_of(repos, agent).conversation.hear(Words("one more thing", door=Door.API))
    assert life.maybe_dream(None) is None  # in the loop: a note waits, no dream


def test_the_owner_hears_once_of_a_contact_request_an_approval_and_a_refused_message(tmp_path):
    agent = make_agent(tmp_path, FakeLLM("fake", responses=[block(("memory.archive", {"tier": "diary", "ref": "1"}))]))
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        m.people.add_identity(m.people.owner().id, "matrix", "@owner:hs")
        m.people.update(m.people.owner().id, preferred_channel="matrix")
    arrive(agent, MATRIX, "$0", "@owner:hs", "hi")  # the owner's direct room
    agent.tick()
    arrive(agent, MATRIX, "$1", "@stranger:hs", "let me in", room="!strangers:hs", private=False)
    arrive(agent, MATRIX, "$2", "@stranger:hs", "please", room="!strangers:hs", private=False)
    agent.tick()
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        rows = m.channels.outbox(limit=50)
        to_owner = [r for r in rows if r.recipient == "@owner:hs" and r.idempotency_key.startswith("notice:")]
        keys = sorted(r.idempotency_key.split(":")[1] for r in to_owner)
        assert keys == ["approval", "contact"]  # once each, however many messages the stranger sent
        assert all(r.conversation == "!dm:hs" for r in to_owner)  # where the owner alone reads
        stranger = [r for r in rows if r.recipient == "@stranger:hs"]
        assert len(stranger) == 1 and "passed your message to my owner" in stranger[0].text
        assert stranger[0].conversation is None  # the room they wrote in is not known to be theirs alone
        m.channels.mark_failed(stranger[0].id, "M_FORBIDDEN")  # refused: it was to a stranger, no notice
        ann_id = m.people.add("Ann", role="guest").id
        m.people.add_identity(ann_id, "matrix", "@ann:hs")
    arrive(agent, MATRIX, "$3", "@ann:hs", "hi from Ann")
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        row = m.channels.send(m.people.get(ann_id), "hello Ann", now=agent.services.clock())
        m.channels.mark_failed(row.id, "M_FORBIDDEN: not in the room")
        m.channels.mark_failed(row.id, "M_FORBIDDEN: not in the room")
        refused = [r for r in m.channels.outbox(limit=50) if r.idempotency_key.startswith("notice:refused")]
        assert len(refused) == 1 and "hello Ann" not in refused[0].text and "Ann" in refused[0].text
        assert m.conversation.waiting_for_owner() == {"contacts": 1, "approvals": 1, "refused": 2, "unread": 1}


def test_the_stranger_line_can_be_switched_off(tmp_path):
    agent = make_agent(tmp_path, conversation={"stranger_reply": False, "tell_owner": False})
    arrive(agent, MATRIX, "$1", "@stranger:hs", "hello?")
    with agent.services.db.unit() as repos:
        assert managers_of(repos, agent).channels.outbox() == []


def test_quiet_hours_hold_a_notice_but_not_a_reply_to_someone_who_just_wrote(tmp_path):
    agent = make_agent(tmp_path, FakeLLM("fake", responses=[block(("messages.send", {"text": "I'm here."}))]))
    now = agent.services.clock()
    quiet = f"{(now - timedelta(hours=1)):%H:%M}-{(now + timedelta(hours=2)):%H:%M}"
    with agent.services.db.unit() as repos:
        m = managers_of(repos, agent)
        owner = m.people.owner()
        m.people.add_identity(owner.id, "matrix", "@owner:hs")
        m.people.update(owner.id, quiet_hours=quiet)
    arrive(agent, MATRIX, "$1", "@owner:hs", "can't sleep, are you there?")
    agent.tick()
    arrive(agent, MATRIX, "$2", "@stranger:hs", "hello?")
    with agent.services.db.unit() as repos:
        rows = {r.text: r for r in managers_of(repos, agent).channels.outbox()}
        assert rows["I'm here."].not_before is None  # a reply to someone who just wrote goes now
        [notice] = [r for r in rows.values() if r.idempotency_key.startswith("notice:contact")]
        held = notice.not_before
        assert held is not None and held.replace(tzinfo=held.tzinfo or UTC) > now  # it waits past them


def _answers_notes(prompt: str) -> str:
    return block(("messages.send", {"text": "Here I am."})) if "[note " in prompt else "A thought of my own."


def test_a_note_during_a_dream_wakes_it_and_is_answered_first(agent_factory):
    from datetime import datetime

    from graph.loop.driver import Stopper, run_loop
    from tests.unit.test_autonomy import Clock, DreamsUntilWoken, utc_agent

    clock = Clock(datetime(2026, 11, 21, 1, 0, tzinfo=UTC))  # the quiet hours: a dream is due
    fake = DreamsUntilWoken("fake", responses=_answers_notes, json_answer={"emotions": []})
    agent = utc_agent(agent_factory, fake, clock=clock)
    with agent.services.db.unit() as repos:
        managers_of(repos, agent).conversation.hear(
            Words("Good night.", door=Door.API, at=clock() - timedelta(hours=1))
        )
    agent.tick()

    def writes_when_dreaming() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if fake.calls and fake.calls[-1]["json_schema"] and "dreaming" in fake.calls[-1]["prompt"]:
                with agent.services.db.unit() as repos:
                    managers_of(repos, agent).conversation.hear(Words("Are you awake?", door=Door.API, at=clock()))
                return
            time.sleep(0.05)

    human = threading.Thread(target=writes_when_dreaming)
    human.start()
    result = run_loop(agent, ticks=1, stopper=Stopper(), idle_poll_s=0)
    human.join(timeout=30)
    assert [d["status"] for d in result.dreams] == ["woken"]  # the dream yielded at the step it was in
    state = result.last_state
    assert "Are you awake?" in state["prompt"]  # the tick after it answered the note
    assert [e["status"] for e in state["executed"] if e["type"] == "messages.send"] == ["executed"]


def test_a_note_during_a_pause_ends_it_and_is_answered_first(tmp_path):
    from graph.loop.driver import Stopper, run_loop

    agent = make_agent(tmp_path, FakeLLM("fake", responses=_answers_notes))
    with agent.services.db.unit() as repos:  # the persona's pace, as a stagnation reflex's radical pause would set it
        managers_of(repos, agent).loop.update_cycle("main", pause_s=600)
    done: dict = {}
    loop = threading.Thread(
        target=lambda: done.update(result=run_loop(agent, ticks=2, stopper=Stopper(), autonomy=False, note_poll_s=0.05))
    )
    loop.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the first tick is done: the loop pauses
        with agent.services.db.unit() as repos:
            if repos.ticks.count() >= 1 and repos.ticks.recent(1)[0].finished_at is not None:
                break
        time.sleep(0.05)
    with agent.services.db.unit() as repos:
        managers_of(repos, agent).conversation.hear(Words("Wake up, the tide turned.", door=Door.API))
    loop.join(timeout=60)  # a hang guard: a pause that did not end would hold it for 600 s
    assert not loop.is_alive(), "the pause did not end when the note came"
    state = done["result"].last_state
    assert "Wake up, the tide turned." in state["prompt"]
    assert [e["status"] for e in state["executed"] if e["type"] == "messages.send"] == ["executed"]


def test_a_cut_cancels_only_the_thinking_threads_call_not_a_background_question(tmp_path):
    """The cut is this thread's (llm/registry.py `cancel_here`): a background job's model call in another thread,
    under the same registry, is not cancelled with it."""
    from llm import LLMCancelled
    from llm.base import Sampling

    class Waits(FakeLLM):
        def complete(self, prompt, sampling, *, stop=None, json_schema=None, on_token=None, cancel=None):
            assert cancel is not None
            if cancel.wait(float(prompt.split()[-1])):
                raise LLMCancelled("cancelled")
            return super().complete(prompt, sampling, stop=stop, json_schema=json_schema, on_token=on_token)

    agent = make_agent(tmp_path, Waits("fake", responses=["done"]))
    llms = agent.services.llms
    outcome: dict = {}

    def background() -> None:
        try:
            outcome["background"] = llms.generate("llm_task", prompt="wait 0.6", sampling=Sampling()).text
        except LLMCancelled:
            outcome["background"] = "cancelled"

    other = threading.Thread(target=background)
    here = threading.Event()
    with llms.cancel_here(here):
        other.start()
        threading.Timer(0.2, here.set).start()
        with pytest.raises(LLMCancelled):
            llms.generate("think", prompt="wait 5", sampling=Sampling())
    other.join(timeout=10)
    assert outcome == {"background": "done"}
