"""The voice on the real embedded model: a human note gets a reply in words within two ticks (persona/voice.py)."""

import pytest

from graph.agent import build_agent
from persona.prose import is_prose

pytestmark = pytest.mark.integration


def test_a_note_gets_a_prose_reply_within_two_ticks(tmp_path):
    agent = build_agent("repl", data_dir=str(tmp_path), embedded_context_window=4096, checkpointer="memory")
    agent.services.settings.sampling.max_tokens = 32  # the thought is not under test: keep the ticks short
    with agent.services.db.unit() as repos:
        note_id = repos.notes.add("Hello! What is your name, and what are you thinking about?", source="user").id
    sent = []
    for _ in range(2):
        state = agent.tick()
        sent = [e for e in state["executed"] if e["type"] == "messages.send" and e["status"] == "executed"]
        if sent:
            break
    assert sent, state.get("reply")
    with agent.services.db.unit() as repos:
        reply = max(repos.notes.list(source="llm"), key=lambda n: n.id).text
        assert repos.notes.get(note_id).read
        assert {c.purpose for c in repos.llm_calls.recent(100)} >= {"think", "reply"}
    assert is_prose(reply, min_words=2), reply
    agent.close()
