"""What the conversation block costs (JSON): the prompt tokens of "My conversation with … so far" on ticks that
answer someone, as a conversation grows, at the default settings (`conversation.turns` 12, `conversation.share` 0.2)
or the ones given.

The default persona, a fake model that answers every note with a messages.send of ordinary length, and notes of
ordinary length from the owner (the Talk page) or a guest (Matrix), one per tick. Tokens are the fake model's count
(≈ 4 characters a token, what the budget uses for it). Printed: the block's tokens per answering tick, their median
and max once the conversation is longer than the turns kept, the block's share of the prompt, and the whole
prompt's median.

    python bench/conversation_block.py [--notes 30] [--turns 12] [--share 0.2] [--guest]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from graph.agent import build_agent  # noqa: E402
from graph.services import open_services  # noqa: E402
from managers.channels import Arrival  # noqa: E402
from managers.conversation import Words  # noqa: E402
from memory.note_kinds import Door  # noqa: E402
from persona.settings import ChannelEntry  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.memory import HashEmbedder  # noqa: E402

NOTES = [
    "How are the tides today? I was walking by the harbour and the water looked very low.",
    "I read about lighthouses last night; did you know some keepers lived there alone for years?",
    "Do you remember the pier we talked about, the one with the old wooden benches?",
    "Tell me a short story about a gull who wanted to be a sailor.",
    "The rain stopped an hour ago and the street smells of wet stone.",
    "I bought fresh bread from the bakery on the corner, still warm.",
    "What would you like to think about this evening?",
    "The sea is calm now; the boats are coming back in.",
]
REPLY = (
    "That sounds lovely. The tide turns a little after six tonight, so the harbour will fill again soon; "
    "tell me what you see when it does."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notes", type=int, default=30)
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--guest", action="store_true", help="the notes come from a guest over Matrix")
    args = parser.parse_args()
    answer = (
        "I answer.\n# Commands:\n"
        + json.dumps([{"type": "messages.send", "args": {"text": REPLY}}])
        + "\n# End commands"
    )
    fake = FakeLLM("fake", responses=lambda prompt: answer)
    with tempfile.TemporaryDirectory(prefix="anima-conversation-block-") as tmp:
        services = open_services(
            data_dir=tmp,
            embedded=False,
            providers={"fake": fake},
            entries=[{"id": "fake", "provider": "fake", "priority": 1}],
            embedder=HashEmbedder(),
            conversation={"turns": args.turns, "share": args.share},
        )
        agent = build_agent("repl", services=services, data_dir=tmp, checkpointer="memory")
        entry = ChannelEntry(kind="matrix", name="matrix")
        if args.guest:
            with services.db.unit() as repos:
                m = services.managers.over(repos)
                ann = m.people.add("Ann", role="guest")
                m.people.add_identity(ann.id, "matrix", "@ann:example.org")
        block, prompt, shares = [], [], []
        for i in range(args.notes):
            text = NOTES[i % len(NOTES)]
            with services.db.unit() as repos:
                m = services.managers.over(repos)
                if args.guest:
                    now = services.clock()
                    m.channels.receive(
                        Arrival(
                            channel="matrix",
                            platform_id=f"${i}",
                            sender="@ann:example.org",
                            sender_name="Ann",
                            conversation="!dm",
                            text=text,
                            sent_at=now,
                            private=True,
                        ),
                        entry,
                        now=now,
                    )
                else:
                    m.conversation.hear(Words(text, door=Door.WEB))
            state = agent.tick()
            layers = {layer["layer"]: layer["tokens"] for layer in state["context_report"].get("layers", [])}
            total = sum(layers.values())
            block.append(layers.get("conversation", 0))
            prompt.append(total)
            shares.append(layers.get("conversation", 0) / total if total else 0.0)
        agent.close()
    full = block[args.turns :] or block
    print(
        json.dumps(
            {
                "bench": "conversation_block",
                "notes": args.notes,
                "turns": args.turns,
                "share": args.share,
                "audience": "guest (Matrix)" if args.guest else "owner (the page)",
                "block_tokens": block,
                "block_tokens_when_full": {"median": statistics.median(full), "max": max(full)},
                "share_of_prompt_when_full": round(statistics.median(shares[args.turns :] or shares), 3),
                "prompt_tokens_median": statistics.median(prompt),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
