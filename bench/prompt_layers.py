"""Prompt-layer order benchmark (JSON): how much of each tick's prompt is the same text as the last tick's, from the
start — the prefix a model server with a prompt cache (llama.cpp's `cache_prompt`, vLLM's prefix caching) does not
evaluate again — with anima's order (the bootstrap files, static, at the end of the system message, before memory)
and with claw0's (the bootstrap files after memory, in the changing part).

    python bench/prompt_layers.py [--ticks 8]

The default persona, a fake model with distinct thoughts, a note from the human every tick (so recall, notes and
recent thoughts change as they do in use). Tokens are the fake model's count (≈ 4 characters a token).
`reused_prefix_tokens`: the median, over ticks 2…N, of the prefix shared with the previous tick's prompt;
`prompt_tokens`: the median prompt; `bootstrap_tokens`: the bootstrap layer's size. `guide_names_tick`: the same with
the commands guide's example ids naming the tick, as they did before (then the shared prefix ends at the guide).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nodes.steps.s04_prepare_context as prepare  # noqa: E402
from graph.agent import build_agent  # noqa: E402
from graph.services import open_services  # noqa: E402
from llm.base import approx_tokens  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.memory import HashEmbedder  # noqa: E402

NOTES = [
    "How are the tides today?",
    "I read about lighthouses.",
    "Do you remember the pier?",
    "Tell me a story.",
    "What did you dream?",
    "The rain stopped.",
    "I bought bread.",
    "Goodnight soon.",
    "Are you there?",
    "The sea is calm.",
]


def claw0_order(original: Callable[..., Any]) -> Callable[..., Any]:
    """`_chat_blocks` with the bootstrap layer moved after memory (into the user message), claw0's layer 6."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        blocks, report, sources = original(*args, **kwargs)
        bootstrap = [dataclasses.replace(b, system=False) for b in blocks if b.name == "bootstrap"]
        return [b for b in blocks if b.name != "bootstrap"] + bootstrap, report, sources

    return wrapped


def shared_prefix(a: str, b: str) -> str:
    return os.path.commonprefix([a, b])


def run(order: str, ticks: int, guide_names_tick: bool) -> dict[str, Any]:
    original, guide = prepare._chat_blocks, prepare.COMMANDS_GUIDE
    if order == "claw0":
        prepare._chat_blocks = claw0_order(original)  # type: ignore[assignment]
    if guide_names_tick:  # the commands guide as it was: its example ids named the tick
        prepare.COMMANDS_GUIDE = guide.replace('"cmd_id": "c', '"cmd_id": "t{tick}-')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            thoughts = iter(f"Thought {i}: the tide turns and I count the gulls, {i} of them." for i in range(10_000))
            fake = FakeLLM("fake", responses=lambda prompt: next(thoughts))
            services = open_services(
                data_dir=tmp,
                embedded=False,
                providers={"fake": fake},
                entries=[{"id": "fake", "provider": "fake", "priority": 1}],
                embedder=HashEmbedder(),
            )
            agent = build_agent("repl", services=services, data_dir=tmp, checkpointer="memory")
            prompts, bootstrap_tokens = [], 0
            for tick in range(ticks):
                with services.db.unit() as repos:
                    repos.notes.add(NOTES[tick % len(NOTES)], source="user")
                state = agent.tick()
                prompts.append(state["prompt"])
                bootstrap_tokens = next(
                    (layer["tokens"] for layer in state["context_report"]["layers"] if layer["layer"] == "bootstrap"), 0
                )
            services.db.close()
    finally:
        prepare._chat_blocks, prepare.COMMANDS_GUIDE = original, guide  # type: ignore[assignment]
    reused = [approx_tokens(shared_prefix(a, b)) for a, b in zip(prompts, prompts[1:])]
    return {
        "reused_prefix_tokens": statistics.median(reused),
        "prompt_tokens": statistics.median(map(approx_tokens, prompts)),
        "bootstrap_tokens": bootstrap_tokens,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=8)
    ticks = parser.parse_args().ticks
    result = {
        "ticks": ticks,
        "anima": run("anima", ticks, False),
        "claw0": run("claw0", ticks, False),
        "guide_names_tick": {"anima": run("anima", ticks, True), "claw0": run("claw0", ticks, True)},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
