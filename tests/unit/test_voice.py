"""The voice on a small model (persona/voice.py): the reply turn and the prose-held thought, on fake LLMs."""

import pytest

from graph.agent import build_agent
from graph.services import open_services
from persona.prose import PROSE_LETTERS, degenerate, is_prose, script_of
from persona.voice import parse_reply, reply_letters, reply_prompt, wanted
from tests.fakes.llm import FakeLLM
from tests.fakes.memory import HashEmbedder

NOTE = "Hello! What is your name, and what are you thinking about?"
SEND = '# Commands:\n[{"cmd_id": "t1-1", "type": "messages.send", "args": {"text": "Hi human!"}}]\n# End commands'


def replying(reply: str = "My name is Lumen, and I am thinking about the sea."):
    """A fake model: the reply turn's prompt (a few-shot conversation) gets `reply`, anything else a thought."""
    return lambda prompt: reply if prompt.rstrip().endswith("Lumen:") else "The sea is calm today, I think."


def embedded_agent(tmp_path, fake: FakeLLM, **flags):
    """An agent whose one model is registered as the embedded llama.cpp model (the fake answers for it)."""
    services = open_services(
        data_dir=str(tmp_path),
        embedded=False,
        providers={fake.id: fake},
        entries=[{"id": fake.id, "provider": "llamacpp", "priority": 100}],
        embedder=HashEmbedder(),
        **flags,
    )
    return build_agent("repl", services=services, data_dir=str(tmp_path), checkpointer="memory")


def calls(agent, purpose: str) -> int:
    with agent.services.db.unit() as repos:
        return sum(1 for c in repos.llm_calls.recent(1000) if c.purpose == purpose)


def test_a_waiting_note_gets_a_reply_turn_that_runs_as_messages_send(tmp_path):
    fake = FakeLLM("embedded", responses=replying())
    agent = embedded_agent(tmp_path, fake)
    with agent.services.db.unit() as repos:
        note_id = repos.notes.add(NOTE, source="user").id
    events = [data for mode, data in agent.stream() if mode == "custom"]
    state = agent.state()
    assert state["reply"]["notes"] == [note_id] and state["reply"]["attempts"] == 1
    assert {
        "cmd_id": "t1-reply",
        "type": "messages.send",
        "status": "executed",
        "result": "message sent (note 2)",
    } in state["executed"]
    assert any(e.get("event") == "message" and e["text"].startswith("My name is Lumen") for e in events)
    reply_call = next(c for c in fake.calls if c["prompt"].rstrip().endswith("Lumen:"))
    assert NOTE in reply_call["prompt"] and reply_call["sampling"].letters == reply_letters(NOTE)
    assert reply_call["stop"] and "\n" in reply_call["stop"]
    think_call = next(c for c in fake.calls if "Lumen's new thought" in c["prompt"])
    assert think_call["sampling"].letters == PROSE_LETTERS  # the embedded model's thought is held to words
    with agent.services.db.unit() as repos:
        assert repos.notes.get(note_id).read
        assert [n.text for n in repos.notes.list(source="llm")] == [
            "My name is Lumen, and I am thinking about the sea."
        ]
        assert repos.commands.get("main:1:t1-reply").status == "executed"
    assert calls(agent, "reply") == 1
    agent.services.db.close()


def test_no_note_no_reply_call(tmp_path):
    fake = FakeLLM("embedded", responses=replying())
    agent = embedded_agent(tmp_path, fake)
    state = agent.tick()
    assert state["reply"] == {} and calls(agent, "reply") == 0
    assert not any(c["prompt"].rstrip().endswith("Lumen:") for c in fake.calls)
    agent.services.db.close()


def test_a_server_model_with_auto_gets_no_reply_turn_and_no_mask(agent_factory):
    fake = FakeLLM("fake", responses=replying())  # provider "fake": not the embedded model
    agent = agent_factory(fake)
    with agent.services.db.unit() as repos:
        repos.notes.add(NOTE, source="user")
    state = agent.tick()
    assert state["reply"]["skipped"].startswith("voice.reply_turn is auto")
    assert calls(agent, "reply") == 0 and not any(e["type"] == "messages.send" for e in state["executed"])
    assert all(c["sampling"].letters is None for c in fake.calls)  # its free thought is not held


def test_always_runs_the_turn_on_any_model_but_not_when_the_thought_already_answers(tmp_path):
    fake = FakeLLM("fake", responses=replying())
    services = open_services(
        data_dir=str(tmp_path),
        embedded=False,
        providers={"fake": fake},
        entries=[{"id": "fake", "provider": "fake", "priority": 100}],
        embedder=HashEmbedder(),
        voice={"reply_turn": "always"},
    )
    agent = build_agent("repl", services=services, data_dir=str(tmp_path), checkpointer="memory")
    with agent.services.db.unit() as repos:
        repos.notes.add(NOTE, source="user")
    state = agent.tick()
    assert [e["cmd_id"] for e in state["executed"] if e["type"] == "messages.send"] == ["t1-reply"]
    fake.responses = ["I will answer.\n" + SEND.replace("t1-1", "t2-1")]
    with agent.services.db.unit() as repos:
        repos.notes.add("And how are you?", source="user")
    state = agent.tick()
    assert state["reply"] == {"skipped": "the thought already sends a message"}
    assert [e["cmd_id"] for e in state["executed"] if e["type"] == "messages.send"] == ["t2-1"]
    assert calls(agent, "reply") == 1
    agent.services.db.close()


def test_off_means_off_on_the_embedded_model(tmp_path):
    fake = FakeLLM("embedded", responses=replying())
    agent = embedded_agent(tmp_path, fake, voice={"reply_turn": "off", "prose_thoughts": "off"})
    with agent.services.db.unit() as repos:
        repos.notes.add(NOTE, source="user")
    state = agent.tick()
    assert "off" in state["reply"]["skipped"] and calls(agent, "reply") == 0
    assert all(c["sampling"].letters is None for c in fake.calls)
    agent.services.db.close()


@pytest.mark.parametrize("garbage", ['":":":":":":":":":"', "", "<start_of_image> <h3><b>4</b></h3>", "\n\n\n", "42"])
def test_a_malformed_reply_never_crashes_the_tick(tmp_path, garbage):
    fake = FakeLLM("embedded", responses=replying(garbage))
    agent = embedded_agent(tmp_path, fake)
    with agent.services.db.unit() as repos:
        note_id = repos.notes.add(NOTE, source="user").id
    state = agent.tick()
    assert state["reply"]["attempts"] == 2 and state["reply"]["error"] == "no reply in words"
    assert not any(e["type"] == "messages.send" for e in state["executed"])
    with agent.services.db.unit() as repos:
        tick = repos.ticks.recent(1)[0]
        assert tick.status == "ok" and repos.notes.get(note_id).read
        assert "reply turn" in (repos.processes.open("main")[-1].value if repos.processes.open("main") else "") or any(
            "reply turn" in e for e in state["parse_errors"]
        )
    agent.services.db.close()


def test_a_degenerate_thought_is_flagged_and_not_kept(agent_factory):
    fake = FakeLLM("fake", responses=['":":":":":":":":":":":":":":":":":":":"'])
    agent = agent_factory(fake)
    state = agent.tick()
    assert state["novelty"]["stagnation_flag"] and state["novelty"]["degenerate"]
    assert state["novelty"]["stagnation_reason"].startswith("not a thought in words")
    assert state["emotions"] == []  # nothing to rate: no evaluation call
    with agent.services.db.unit() as repos:
        stored = repos.messages.recent("main", 5, kinds=("response", "stagnation_record"))
        assert [m.kind for m in stored] == ["stagnation_record"] and '":"' not in stored[0].content
        assert {c.purpose for c in repos.llm_calls.recent(100)} == {"think"}


def test_prose_gate_and_scripts():
    assert degenerate('":":":":":":":":":":":"') and degenerate(",\n,\n,\n,\n,\n,\n,\n,\n,\n")
    assert degenerate("{}{}[] 4 <b>4</b> ,, 42 :: 7") is not None and not is_prose("<start_of_image> , <h3>4</h3>")
    assert degenerate("## Plan\n- read my notes\n- answer my human about the sea") is None  # a real model's markdown
    assert degenerate("The sea is calm today.") is None
    assert script_of("Привет! Как тебя зовут?") == "cyrillic" and script_of("こんにちは！名前は？") == "japanese"
    assert script_of("Hello!") == "latin" and script_of("123") == "latin"
    assert "Ѐ-ӿ" in reply_letters("Привет") and "A-Za-z" in reply_letters("Привет")
    assert "Ѐ" not in reply_letters("Hello")
    assert is_prose("Я думаю о море и о моём человеке.", min_words=5)


def test_reply_prompt_and_parse():
    prompt = reply_prompt(
        "Lumen",
        "# Identity\n- Nature: a curious, patient mind",
        ["Как тебя зовут?"],
        "I was thinking about the tides and the moon.",
    )
    # the frame, the examples and the human's turns are in the note's language (i18n: its script says Russian)
    assert prompt.endswith("Человек: Как тебя зовут?\nLumen:") and "a curious, patient mind" in prompt
    assert "Человек: Ты любишь море?" in prompt and "говорит со своим человеком" in prompt
    assert reply_prompt("Lumen", "", ["Do you like the sea?"]).endswith("Human: Do you like the sea?\nLumen:")
    assert "thinking about the tides" in prompt
    assert "was just thinking" not in reply_prompt("Lumen", "", ["Hi?"], '":":":"')  # no junk thought shown
    assert parse_reply(" My name is Lumen.\nHuman: next") == "My name is Lumen."
    assert parse_reply(" I like the sea. It calms me and I often think of the") == "I like the sea."
    assert parse_reply('":":":"') is None and parse_reply("") is None and parse_reply("ok") is None
    assert wanted("auto", "llamacpp") and not wanted("auto", "openai") and wanted("always", "openai")
    assert not wanted("off", "llamacpp")


def test_the_reply_turn_fits_a_small_window_with_the_note_answered_and_the_thought(tmp_path):
    """At the embedded default's 2,048-token window: notes as the tick showed them (a long one's head and tail),
    the earlier ones dropped first, the one answered always kept, and the prompt inside the window."""
    fake = FakeLLM("embedded", context_window=2048, responses=replying())
    agent = embedded_agent(tmp_path, fake)
    earlier = ["An earlier note about the harbour. " + "h" * 1500 for _ in range(3)]
    long_note = "Please read my log and tell me what you see. " + "x" * 20_000 + " THE END OF THE LOG"
    with agent.services.db.unit() as repos:
        for text in [*earlier, long_note]:
            repos.notes.add(text, source="user")
    agent.tick()
    reply_call = next(c for c in fake.calls if c["prompt"].rstrip().endswith("Lumen:"))
    prompt = reply_call["prompt"]
    assert "Please read my log" in prompt and "THE END OF THE LOG" in prompt  # the answered note's head and tail
    assert "characters not shown here" in prompt and "x" * 5000 not in prompt
    assert "The sea is calm today" in prompt  # the thought it answers from
    assert fake.count_tokens(prompt) + agent.services.settings.voice.reply_max_tokens <= 2048
    agent.services.db.close()
