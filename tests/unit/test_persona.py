"""Persona directory: bootstrap files and caps, skills (frontmatter, override by name, caps), the prompt's
layers in order, and an edited file shaping the very next tick's prompt."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graph.agent import build_agent
from graph.services import open_services
from persona import PersonaError, default_persona_dir, load_persona
from persona.loader import FILE_CAP
from persona.skills import MAX_SKILL_CHARS, MAX_SKILLS, load_skills, parse_skill
from tests.fakes.llm import FakeLLM
from tests.fakes.memory import HashEmbedder

ROOT = Path(__file__).resolve().parents[2]


def write_skill(
    directory: Path, name: str, description: str = "does a thing", invocation: str = "auto", body: str = "Step one."
) -> Path:
    path = directory / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\ninvocation: {invocation}\n---\n{body}\n")
    return path


def copy_persona(tmp_path: Path) -> Path:
    target = tmp_path / "persona"
    shutil.copytree(default_persona_dir(), target)
    return target


def agent_for(tmp_path: Path, persona_dir: Path, fake: FakeLLM):
    services = open_services(
        data_dir=str(tmp_path / "data"),
        embedded=False,
        persona_dir=str(persona_dir),
        providers={fake.id: fake},
        entries=[{"id": fake.id, "provider": "fake", "priority": 1}],
        embedder=HashEmbedder(),
    )
    return build_agent("repl", services=services, data_dir=str(tmp_path / "data"), checkpointer="memory")


def test_the_default_persona_is_complete():
    persona = load_persona()
    assert set(persona.files) == {
        "IDENTITY.md",
        "SOUL.md",
        "TOOLS.md",
        "USER.md",
        "AGENTS.md",
        "HEARTBEAT.md",
        "BOOTSTRAP.md",
        "MEMORY.md",
    }
    assert persona.seed and persona.ethics.principles and persona.config["reflexes"]
    assert {s.name: s.invocation for s in persona.skills} == {
        "check-in": "manual",
        "journaling": "auto",
        "research": "auto",
    }
    assert persona.truncated == []


def test_skill_frontmatter_is_parsed_with_yaml_and_errors_name_file_and_line(tmp_path):
    path = write_skill(tmp_path, "tides", description="'Watch: the tides'", body="Check the table.")
    skill = parse_skill(path)
    assert (skill.name, skill.description, skill.invocation) == ("tides", "Watch: the tides", "auto")
    assert skill.render().startswith("### Skill: tides\nWatch: the tides\n\nCheck the table.")
    bad = tmp_path / "bad" / "SKILL.md"
    bad.parent.mkdir()
    bad.write_text("---\nname: bad\ndescription: [unclosed\n---\nbody\n")
    with pytest.raises(ValueError, match=r"bad/SKILL.md:\d+: invalid YAML frontmatter"):
        parse_skill(bad)
    bad.write_text("---\nname: bad\n---\nbody\n")
    with pytest.raises(ValueError, match="field 'description' is required"):
        parse_skill(bad)
    bad.write_text("---\nname: bad\ndescription: x\ninvocation: sometimes\n---\n")
    with pytest.raises(ValueError, match="invocation' must be one of auto, manual"):
        parse_skill(bad)


def test_later_skill_directories_override_by_name_and_caps_apply(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    write_skill(first, "journaling", body="old way")
    write_skill(second, "journaling", body="new way")
    write_skill(first, "solo")
    skills, left_out = load_skills([first, second])
    assert {s.name: s.body.strip() for s in skills} == {"journaling": "new way", "solo": "Step one."}
    many = tmp_path / "many"
    for i in range(MAX_SKILLS + 3):
        write_skill(many, f"s{i:03d}", invocation="manual")
    skills, left_out = load_skills([many])
    assert len(skills) == MAX_SKILLS and len(left_out) == 3 and "more than 150 skills" in left_out[0]
    big = tmp_path / "big"
    for i in range(4):
        write_skill(big, f"b{i}", body="x" * 9_000)
    skills, left_out = load_skills([big])
    assert len(skills) == 3 and sum(len(s.render()) for s in skills) <= MAX_SKILL_CHARS
    assert left_out == [f"skill b3 (skills exceed {MAX_SKILL_CHARS} characters)"]


def test_bootstrap_files_are_capped_at_a_line_end_and_marked(tmp_path):
    persona_dir = copy_persona(tmp_path)
    (persona_dir / "AGENTS.md").write_text("a line of text\n" * 2000)
    persona = load_persona(persona_dir)
    text = persona.file("AGENTS.md")
    assert len(text) <= FILE_CAP and text.endswith(f"[… truncated: file exceeds {FILE_CAP} characters]")
    assert text.split("\n[…")[0].endswith("a line of text") and "AGENTS.md" in persona.truncated
    write_skill(persona_dir / "skills", "journaling", description="my own journaling", body="Mine.")
    assert next(s for s in load_persona(persona_dir).skills if s.name == "journaling").body.strip() == "Mine."
    (persona_dir / "skills" / "broken").mkdir()
    (persona_dir / "skills" / "broken" / "SKILL.md").write_text("no frontmatter")
    with pytest.raises(PersonaError, match="broken/SKILL.md:1"):
        load_persona(persona_dir)


def test_the_prompt_has_the_layers_in_order_and_an_edit_shapes_the_next_tick(tmp_path):
    persona_dir = copy_persona(tmp_path)
    fake = FakeLLM("fake", responses=["First thought.", "Second thought.", "Third thought.", "Fourth thought."])
    agent = agent_for(tmp_path, persona_dir, fake)
    state = agent.tick()
    system, user = (m["content"] for m in state["prompt_messages"])
    marks = ["I am Lumen", "# Soul", "# How to act: commands", "# My skills", "# Ethics"]
    positions = [system.find(m) for m in marks]
    assert -1 not in positions and positions == sorted(positions), dict(zip(marks, positions))
    assert "### Skill: journaling" in system and "- check-in: Check in with my human" in system
    assert "# Heartbeat" not in system  # claw0's layer 6 comes after memory (layer 5), in the user message
    assert [layer["layer"] for layer in state["context_report"]["layers"]][:5] == [
        "identity",
        "soul",
        "commands",
        "skills",
        "ethics",
    ]
    state = agent.tick()  # now with recent thoughts
    user = state["prompt_messages"][1]["content"]
    layers = [layer["layer"] for layer in state["context_report"]["layers"]]
    # claw0's order, least changing first: resident memory (5), the bootstrap files (6), the runtime context (7),
    # the channel hint (8); then the tick's own part (recent thoughts…) and the instruction with the clock, last
    assert (
        layers.index("core")
        < layers.index("bootstrap")
        < layers.index("runtime")
        < layers.index("channel")
        < layers.index("recent")
        and layers[-1] == "instruction"
    ), layers
    marks = [
        "What I always keep in mind",
        "# Heartbeat",
        "# Runtime",
        "reads my messages.send in their terminal",
        "First thought.",
        f"tick {state['tick']}",
        "Think your next thought",
    ]
    positions = [user.find(m) for m in marks]
    assert -1 not in positions and positions == sorted(positions), dict(zip(marks, positions))
    # the system message (identity … ethics) is the same text tick after tick: a prompt cache keeps it
    assert state["prompt_messages"][0]["content"] == system
    (persona_dir / "SOUL.md").write_text("# Soul\n\nI love lighthouses above everything.\n")
    write_skill(persona_dir / "skills", "tide-watch", description="Watch the tides.")
    agent.tick()
    prompt = [c for c in fake.calls if c["json_schema"] is None][-1]["prompt"]
    assert "I love lighthouses above everything." in prompt and "### Skill: tide-watch" in prompt
    (persona_dir / "config.yaml").write_text("reflexes: [unclosed\n")  # a broken edit: the last good persona stays
    agent.tick()
    prompt = [c for c in fake.calls if c["json_schema"] is None][-1]["prompt"]
    assert "I love lighthouses above everything." in prompt
    agent.services.db.close()


def test_persona_new_scaffolds_a_renamed_copy_and_refuses_to_overwrite(tmp_path):
    target = tmp_path / "nova"
    run = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "persona", "new", "Nova", "--dir", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "8 bootstrap files, 3 skills" in run.stdout
    persona = load_persona(target)
    assert "I am Nova" in persona.file("IDENTITY.md") and "Lumen" not in persona.file("IDENTITY.md")
    again = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "persona", "new", "Nova", "--dir", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 1 and "already exists" in again.stderr
