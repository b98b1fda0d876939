"""Fitting the prompt into a small window (issue 32): a too-large block shrinks to a smaller form before smaller,
more important ones are dropped; identity, soul, ethics and the command guide are never dropped; the order of
what goes is the one blocks.py documents."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nodes.commands import ESSENTIAL, FAMILIES, MOST_USED, registry
from nodes.context import AnimaContext
from nodes.state import TickState
from nodes.steps.s04_prepare_context import prepare_context
from nodes.steps.s04_prepare_context.blocks import Block, fit_blocks, size_of
from persona.settings import Settings
from tests.conftest import make_agent
from tests.fakes.llm import FakeLLM


def words(text: str) -> int:
    return len(text.split())


def w(n: int, tag: str = "x") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def kept(blocks: list[Block]) -> dict[str, list[str]]:
    return {b.name: b.items for b in blocks if b.items}


def test_a_block_over_its_share_takes_a_smaller_form_before_anything_is_dropped():
    blocks = [
        Block("guide", "", [w(400)], 180, forms=[[w(200)], [w(50)]], share=0.3, keep="head"),
        Block("core", "", [w(30)], 125),
    ]
    out, drops = fit_blocks(blocks, 250, words)
    assert kept(out) == {"guide": [w(50)], "core": [w(30)]}  # 200 words is over 30% of 250: the 50-word form
    assert drops[0].startswith("guide: shrunk") and not any(d.startswith("core") for d in drops)


def test_lowest_priority_goes_first_oldest_item_first_and_a_form_before_the_whole_block():
    blocks = [
        Block("identity", "", [w(20)], 200, keep="head"),
        Block("skills", "", [w(40)], 175, forms=[[w(10)]]),
        Block("ethics", "", [w(10)], 170, keep="whole"),
        Block("core", "", [w(30)], 125),
        Block("recent", "", [w(25, "a"), w(25, "b"), w(25, "c")], 100, trim_oldest=True, last_priority=126),
    ]
    _, drops = fit_blocks(blocks, 60, words)
    # 182 tokens: the two oldest thoughts go (priority 100), then core (125) before the last thought (126), then the
    # skills take their smaller form (175) — identity and ethics stay whole
    assert drops == [
        "recent: oldest item (26 tokens)",
        "recent: oldest item (26 tokens)",
        "core: whole block (31 tokens)",
        "recent: whole block (26 tokens)",
        "skills: shrunk to a smaller form (41 → 11 tokens)",
    ]
    assert kept(blocks) == {"identity": [w(20)], "skills": [w(10)], "ethics": [w(10)]}
    assert size_of(blocks, words) <= 60


def test_the_latest_thought_outlives_core_memory():
    blocks = [
        Block("core", "", [w(30)], 125),
        Block("recent", "", [w(25, "a"), w(25, "b")], 100, trim_oldest=True, last_priority=126),
    ]
    fit_blocks(blocks, 40, words)
    assert kept(blocks) == {"recent": [w(25, "b")]}


def test_ethics_is_never_dropped_or_cut_and_the_kept_blocks_are_cut_to_their_head_last():
    ethics = ["- Be honest.", "- Do no harm; refuse actions that could hurt people."]
    blocks = [
        Block("identity", "", ["I am Lumen.\n" + w(300)], 200, keep="head"),
        Block("soul", "", [w(300)], 190, keep="head"),
        Block("guide", "", [w(100)], 180, forms=[[w(40)]], keep="head"),
        Block("ethics", "Ethics", ethics, 170, keep="whole"),
        Block("notes", "", [w(50)], 195, trim_oldest=True),
    ]
    _, drops = fit_blocks(blocks, 120, words)
    assert kept(blocks)["ethics"] == ethics
    assert "notes: whole block (51 tokens)" in drops and "guide: shrunk to a smaller form (101 → 41 tokens)" in drops
    cuts = [d.split(":")[0] for d in drops if "cut to its head" in d]
    assert cuts[:2] == ["guide", "soul"]  # lowest priority first; identity, the strongest, last
    assert size_of(blocks, words) <= 120
    # nothing can make ethics go: with no room at all it is still there (prepare_context then refuses the budget)
    only = [Block("ethics", "Ethics", list(ethics), 170, keep="whole")]
    fit_blocks(only, 1, words)
    assert only[0].items == ethics


def test_the_compact_guide_names_every_family_in_a_line_with_its_most_used_commands():
    settings = Settings()
    guides = {
        form: registry().guide(settings=settings, form=form) for form in ("full", "brief", "compact", "essential")
    }
    assert len(guides["full"]) > len(guides["brief"]) > len(guides["compact"]) > len(guides["essential"])
    lines = guides["compact"].splitlines()
    families = {line[2:].split(":")[0] for line in lines}
    on = {
        f.name for f in FAMILIES if any(not s.off_because(settings) for s in f.specs if s.type in MOST_USED | ESSENTIAL)
    }
    assert families == on and len(lines) == len(on)  # one line each
    assert "- goals: goals.add, tasks.add, tasks.update, …" in lines
    assert "search.web" not in guides["compact"]  # off without a search backend: left out, help.show says why
    assert all(f"- {t} " in guides["essential"] for t in ESSENTIAL)


def _prompt(tmp_path, window: int, notes: tuple[str, ...] = (), thoughts: int = 0):
    agent = make_agent(tmp_path, FakeLLM("fake", context_window=window))
    services = agent.services
    with services.db.unit() as repos:
        repos.threads.ensure("main", origin="root")
        for n in range(thoughts):
            repos.messages.add(thread_id="main", tick=n + 1, kind="response", content=f"thought {n}: " + w(250, "t"))
        for text in notes:
            repos.notes.add(text, source="user")
    out = prepare_context(
        TickState(thread_id="main", tick=thoughts + 1, mode="chat"),
        SimpleNamespace(context=AnimaContext(services=services)),
    )  # type: ignore[arg-type]
    agent.close()
    return out


def test_at_2048_tokens_the_prompt_keeps_every_layer_with_the_compact_guide(tmp_path):
    out = _prompt(tmp_path, 2048)
    layers = [layer["layer"] for layer in out["context_report"]["layers"]]
    assert layers[:5] == ["identity", "soul", "commands", "skills", "ethics"]
    assert {"core", "bootstrap", "runtime", "channel", "instruction"} <= set(layers)
    assert layers.index("core") < layers.index("bootstrap") < layers.index("runtime") < layers.index("channel")
    assert "- goals: goals.add, tasks.add, tasks.update, …" in out["prompt"]  # the compact guide
    assert "# Ethics" in out["prompt"] and "Do no harm" in out["prompt"]
    assert out["prompt_tokens"] + out["context_report"]["max_tokens"] <= 2048


def test_at_2048_tokens_a_note_and_the_latest_thought_push_out_memory_not_ethics_or_commands(tmp_path):
    note = "Lumen, what do you make of the tide tables I sent? " + w(120, "n")
    out = _prompt(tmp_path, 2048, notes=(note,), thoughts=6)
    layers = {layer["layer"] for layer in out["context_report"]["layers"]}
    assert {"identity", "soul", "commands", "ethics", "notes", "recent"} <= layers
    assert note in out["prompt"] and out["incoming_note_ids"]  # the note is shown whole, and will be marked read
    assert "thought 5:" in out["prompt"] and "thought 0:" not in out["prompt"]  # the latest kept, the oldest gone
    assert any(d.startswith("recent: oldest item") for d in out["context_report"]["dropped"])
    assert out["prompt_tokens"] + out["context_report"]["max_tokens"] <= 2048


def test_a_stelis_child_and_a_task_cycle_at_2048_keep_identity_ethics_and_commands(tmp_path):
    """The smaller default window still leaves a child thread a usable prompt: the default ratio (0.8) twice, and a
    task cycle's 0.5 (the smallest window a child may have, MIN_CHILD_WINDOW); a smaller ratio is refused."""
    from managers.threads import DEFAULT_WINDOW_RATIO, MIN_CHILD_WINDOW, StelisRefused
    from nodes.stelis.threads import open_thread

    agent = make_agent(tmp_path, FakeLLM("fake", context_window=2048))
    services = agent.services
    parents = {
        "main/a": ("main", DEFAULT_WINDOW_RATIO),
        "main/a/b": ("main/a", DEFAULT_WINDOW_RATIO),
        "main/t": ("main", 0.5),
    }
    with services.db.unit() as repos:
        repos.threads.ensure("main", origin="root")
        for child, (parent, ratio) in parents.items():
            open_thread(
                services,
                repos,
                parent_id=parent,
                child_id=child,
                label=child,
                window_ratio=ratio,
                max_depth=3,
                origin="command",
            )
        with pytest.raises(StelisRefused, match=f"under the minimum of {MIN_CHILD_WINDOW}"):
            open_thread(
                services,
                repos,
                parent_id="main",
                child_id="main/small",
                label="small",
                window_ratio=0.4,
                max_depth=3,
                origin="command",
            )
    for child in parents:
        out = prepare_context(
            TickState(thread_id=child, tick=1, mode="chat"), SimpleNamespace(context=AnimaContext(services=services))
        )  # type: ignore[arg-type]
        layers = [layer["layer"] for layer in out["context_report"]["layers"]]
        assert {"identity", "soul", "commands", "ethics", "instruction"} <= set(layers), (child, layers)
        assert "messages.send" in out["prompt"] and "Do no harm" in out["prompt"]
        assert out["prompt_tokens"] + out["context_report"]["max_tokens"] <= out["context_report"]["window_tokens"]
    agent.close()
