"""skills.list / skills.read through ticks: a manual skill is one line in the prompt until the persona reads it;
then its body is in the next prompt (system part, cut to limits.skill_chars), and gone again after."""

from __future__ import annotations

import json

from persona.scaffold import scaffold_persona
from tests.fakes.llm import FakeLLM

BODY = "When the tide tables are needed, I first look for the port's name.\n" + "Step by step, tide after tide.\n" * 400


def block(*commands: tuple[str, dict]) -> str:
    items = [{"cmd_id": f"c{i}", "type": t, "args": a} for i, (t, a) in enumerate(commands, 1)]
    return "Let me see my skills.\n# Commands:\n" + json.dumps(items) + "\n# End commands"


def test_a_manual_skill_is_read_into_the_next_prompt_within_its_budget(agent_factory, tmp_path):
    persona = tmp_path / "persona"
    scaffold_persona("Mira", persona)
    (persona / "skills" / "tides").mkdir()
    (persona / "skills" / "tides" / "SKILL.md").write_text(
        "---\nname: tides\ndescription: Reading tide tables.\ninvocation: manual\n---\n" + BODY
    )
    fake = FakeLLM(
        "fake",
        responses=[
            block(("skills.list", {}), ("skills.read", {"name": "Tides"}), ("skills.read", {"name": "sailing"})),
            "I use the skill.",
            "Later.",
        ],
    )
    agent = agent_factory(fake, persona_dir=str(persona), limits={"skill_chars": 1000})
    listed, read, unknown = agent.tick()["executed"]
    assert "- tides (manual, " in listed["result"] and ": Reading tide tables." in listed["result"]
    assert (
        read["result"]
        == f"skill tides is in my next 1 prompt(s) (cut to 1,000 of its {len(BODY.rstrip()):,} characters)"
    )
    assert unknown["status"] == "failed" and "no skill 'sailing'" in unknown["result"]
    prompts = [c["prompt"] for c in fake.calls if c["json_schema"] is None]
    assert "When the tide tables are needed" not in prompts[0] and "- tides: Reading tide tables." in prompts[0]
    agent.tick()
    system = [c for c in fake.calls if c["json_schema"] is None][1]["prompt"].split("My recent thoughts")[0]
    assert "### Skill: tides (read on request)" in system and "When the tide tables are needed" in system
    assert "the rest of tides is cut" in system and system.count("Step by step, tide after tide.") < 40
    agent.tick()
    assert "When the tide tables are needed" not in [c for c in fake.calls if c["json_schema"] is None][2]["prompt"]
