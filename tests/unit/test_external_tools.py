"""External tools on real parts: a real folder of Markdown notes (an Obsidian vault) synced into the knowledge base
by file time — new, changed and deleted notes, frontmatter and wiki links —; real Git repositories (dulwich) read
through the persona's approved commands; the persona's own files kept in a repository of their own, committed on
each change, their history visible. (The browser's test runs Chromium: tests/integration/test_external_tools.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from sqlalchemy import select, text

from managers import ManagerDeps, Managers
from managers.vault import parse_note
from memory.models import KBDocument, MemoryItem
from nodes.context import utcnow
from reach import git
from tests.fakes.llm import FakeLLM
from tests.fakes.managers import answer

NOTE = """---
title: Harbour figs
tags: [garden, harbour]
aliases: Figs by the wall
---
The fig tree by the [[Harbour Wall|old wall]] ripens in August. See [[Tides]] and ![[fig.png]]. #fruit
"""


def ask(*commands: tuple[str, dict]) -> str:
    listed = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "I look outside.\n# Commands:\n" + json.dumps(listed) + "\n# End commands"


def approve_and_tick(agent) -> dict:
    with agent.services.db.unit() as repos:
        ids = [a.id for a in repos.approvals.pending()]
    for approval_id in ids:
        answer(agent.services.db, approval_id, approve=True, by="human", now=utcnow())
    return agent.tick()


def kb(agent) -> dict[str, tuple[str, list[str]]]:
    """title -> (the chunks' text, their tags), of the live knowledge-base chunks."""
    with agent.services.db.unit() as repos:
        items = repos.session.scalars(select(MemoryItem).where(MemoryItem.tier == "kb", MemoryItem.status == "active"))
        return {i.title: (i.text, list(i.tags or [])) for i in items}


def test_a_note_is_parsed_with_its_frontmatter_and_links():
    note = parse_note(NOTE, "figs")
    assert note.title == "Harbour figs"
    assert note.text.startswith("Harbour figs (also: Figs by the wall)\n\nThe fig tree by the old wall ripens")
    assert "[[" not in note.text and "title:" not in note.text and "See Tides and fig.png." in note.text
    assert note.tags == ["garden", "harbour", "fruit"] and note.links == ["Harbour Wall", "Tides", "fig.png"]


def test_a_watched_vault_follows_new_changed_and_deleted_notes(agent_factory, tmp_path):
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / ".obsidian" / "workspace.md").write_text("not a note")
    (vault / "figs.md").write_text(NOTE)
    (vault / "daily").mkdir()
    (vault / "daily" / "tides.md").write_text("# Tides\n\nHigh water at 06:12.\n")
    fake = FakeLLM("fake", responses=[ask(("vault.sync", {})), "Waiting."])
    agent = agent_factory(fake, tools={"vault": str(vault), "vault_every_s": 0.001})
    first = agent.tick()  # the persona asks to sync now: external, the owner approves
    assert [e["status"] for e in first["executed"]] == ["pending_approval"]
    second = approve_and_tick(agent)
    [ran] = [e for e in second["executed"] if e["type"] == "vault.sync"]
    assert ran["result"] == "vault: 2 added, 0 changed, 0 removed, 0 unchanged", ran
    chunks = kb(agent)
    assert set(chunks) == {"Harbour figs", "tides"}
    assert {"vault", "garden", "harbour", "fruit", "link:Harbour Wall", "link:Tides"} <= set(chunks["Harbour figs"][1])
    # the loop's own poll by file time (autonomy): a changed note replaces its chunks, a deleted one removes them
    from graph.loop.autonomy import Autonomy

    life = Autonomy(agent)
    assert life.maybe_sync_vault().line() == "vault: 0 added, 0 changed, 0 removed, 2 unchanged"
    (vault / "figs.md").write_text(NOTE.replace("ripens in August", "ripens in September"))
    os.utime(vault / "figs.md", ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    (vault / "daily" / "tides.md").unlink()
    (vault / "new.md").write_text("A new note about the ferry.")
    time.sleep(0.01)
    report = life.maybe_sync_vault()
    assert (report.added, report.changed, report.removed) == (["new.md"], ["figs.md"], ["daily/tides.md"])
    chunks = kb(agent)
    assert set(chunks) == {"Harbour figs", "new"} and "September" in chunks["Harbour figs"][0]
    with agent.services.db.unit() as repos:
        docs = repos.session.scalars(select(KBDocument)).all()
        assert sorted(Path(d.path).name for d in docs) == ["figs.md", "new.md"] and {d.source for d in docs} == {
            "vault"
        }
    with agent.services.db.engine.connect() as conn:  # the old chunks left the full-text index too
        assert (
            conn.execute(text("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH 'august OR high'")).scalar() == 0
        )
    hits = agent.services.memory.search("when does the fig ripen")
    assert any("September" in h.item.text for h in hits)


def _repo(path: Path) -> Path:
    """A real repository made by the `git` program (not by the code under test), two commits."""
    path.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Ada",
        "GIT_AUTHOR_EMAIL": "ada@example.org",
        "GIT_COMMITTER_NAME": "Ada",
        "GIT_COMMITTER_EMAIL": "ada@example.org",
    }

    def run(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True, timeout=30)

    run("init", "-q", "-b", "main")
    (path / "README.md").write_text("# Harbour\n")
    run("add", "-A")
    run("commit", "-q", "-m", "A first page")
    (path / "tides.txt").write_text("High water 06:12\n")
    run("add", "-A")
    run("commit", "-q", "-m", "Tide times")
    return path


def test_the_persona_reads_a_repository_after_approval(agent_factory, tmp_path):
    repo = _repo(tmp_path / "harbour")
    fake = FakeLLM(
        "fake",
        responses=[
            ask(
                ("git.log", {"repo": str(repo)}),
                ("git.show", {"repo": str(repo)}),
                ("git.files", {"repo": str(repo), "file": "tides.txt"}),
                ("git.log", {"repo": str(tmp_path)}),
            ),
            "Waiting.",
            "Reading.",
        ],
    )
    agent = agent_factory(fake)
    first = agent.tick()
    assert [e["status"] for e in first["executed"]] == ["pending_approval"] * 4  # each reaches outside
    second = approve_and_tick(agent)
    done = {e["cmd_id"]: e for e in second["executed"] if e.get("approval_id")}
    results = sorted((e["status"], e["result"]) for e in done.values())
    log_line = next(r for s, r in results if "Tide times" in r and "A first page" in r)
    assert log_line.index("Tide times") < log_line.index("A first page") and "Ada" in log_line
    assert any("commit " in r and "add tides.txt" in r for _, r in results)
    assert any(r == "High water 06:12\n" for _, r in results)
    assert any(s == "failed" and "is not a Git repository" in r for s, r in results)
    third = agent.tick()
    assert {s["origin"] for s in third["untrusted"]} >= {"git"}  # what it read is data from outside


def test_the_personas_own_files_are_committed_on_each_change_and_their_history_is_visible(
    agent_factory, tmp_path, persona
):
    fake = FakeLLM("fake", responses=[ask(("persona.history", {})), "…"])
    agent = agent_factory(fake, persona_dir=str(persona))
    deps = ManagerDeps(settings=agent.services.settings, clock=agent.services.clock)
    (persona / "SOUL.md").write_text("I love the harbour.\n")
    with agent.services.db.unit(actor="human") as repos:
        Managers(repos, deps).persona.record_edit("SOUL.md", by="human (web)", now=utcnow())
    (persona / "SOUL.md").write_text("I love the harbour and its gulls.\n")
    with agent.services.db.unit(actor="human") as repos:
        Managers(repos, deps).persona.record_edit("SOUL.md", by="human (web)", now=utcnow())
    with agent.services.db.unit(actor="human") as repos:  # nothing changed: no empty commit
        Managers(repos, deps).persona.record_edit("SOUL.md", by="human (web)", now=utcnow())
    history = git.log(persona)
    assert [c.message for c in history] == ["SOUL.md (by human (web))"] * 2
    assert git.files(persona, history[1].id, "SOUL.md") == "I love the harbour.\n"
    out = subprocess.run(
        ["git", "log", "--format=%s", "--", "SOUL.md"],
        cwd=persona,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout  # the program `git` reads the same history
    assert out.splitlines() == ["SOUL.md (by human (web))"] * 2
    [ran] = agent.tick()["executed"]
    assert ran["status"] == "executed" and ran["result"].count("SOUL.md (by human (web))") == 2
