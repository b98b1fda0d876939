"""The persona's voice on a small model: the reply turn and the prose-held thought.

A 270M base model does not write `messages.send` in its free thought, and left free it drifts into markup and
loops (`":":":"`). Two remedies, each used only where it is needed (`voice` in persona/settings.py; `auto` = on for
the embedded llama.cpp model, off for a server model):

- the reply turn: when a human note waits and the thought sent no message, one short call continues a few-shot
  conversation (REPLY_PROMPT) by one line, sampled only from tokens of the note's script and plain punctuation
  (`Sampling.letters`, a mask over the vocabulary), so the reply is in words and in the note's language. It
  becomes a `messages.send` like any other;
- the prose-held thought: the free thought is sampled under the same mask over every script the persona writes
  in, so what is stored (and shown in every later prompt) is words, not `":":":"` or `<h3>` tags.
A JSON grammar would hold the shape more tightly, but over Gemma's 262k-token vocabulary llama-cpp-python checks
every token against it: 0.2–2 s per token on this machine, against milliseconds for the mask.

Nothing here calls a model; nodes/steps/s05_call_llm.py does.
"""

from __future__ import annotations

import re

import i18n
from persona.prompts import REPLY_EXAMPLES, REPLY_HUMAN, REPLY_PROMPT, REPLY_THINKING
from persona.prose import SCRIPT_LETTERS, is_prose, script_of

EMBEDDED_PROVIDERS = ("llamacpp",)
THOUGHT_CHARS = 220  # of the last thought, shown to the reply turn (it answers "what are you thinking about?")
_NATURE = re.compile(r"^\s*[-*]?\s*Nature:\s*(.+)$", re.MULTILINE | re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?。！？](?=\s|$)")


def wanted(setting: str, provider: str | None) -> bool:
    """Whether a voice remedy applies: `always`, never `off`, and `auto` only on the embedded model."""
    return setting == "always" or (setting == "auto" and (provider or "") in EMBEDDED_PROVIDERS)


def reply_letters(note: str) -> str:
    """The letters a reply to `note` may use: the note's script, plus Latin for names in a non-Latin one."""
    script = script_of(note)
    letters = SCRIPT_LETTERS.get(script, SCRIPT_LETTERS["latin"])
    return letters if script == "latin" else letters + SCRIPT_LETTERS["latin"]


def nature_of(identity: str) -> str:
    """The persona in a phrase: IDENTITY.md's `Nature:` line, else its first sentence after the heading."""
    match = _NATURE.search(identity or "")
    if match:
        return match.group(1).strip().rstrip(".")
    body = " ".join(line.strip() for line in (identity or "").splitlines() if line.strip() and not line.startswith("#"))
    first = re.split(r"(?<=[.!?])\s", body, maxsplit=1)[0].strip().rstrip(".")
    return first[:160] or "a curious mind"


def _short(thought: str) -> str:
    text = " ".join(thought.split())
    if len(text) <= THOUGHT_CHARS:
        return text
    cut = text[:THOUGHT_CHARS]
    ends = list(_SENTENCE_END.finditer(cut))
    return cut[: ends[-1].end()] if ends else cut.rsplit(" ", 1)[0] + "…"


def reply_prompt(name: str, identity: str, notes: list[str], thought: str = "") -> str:
    """The few-shot conversation the reply continues. The last note is the one answered; earlier ones are context."""
    note = notes[-1]
    script = script_of(note)
    examples = REPLY_EXAMPLES.get(script, REPLY_EXAMPLES["latin"])
    language = i18n.of_text(note) or i18n.SOURCE  # the frame in the note's language, like its examples
    human = i18n.text(REPLY_HUMAN, language)
    lines = [f"{human}: {q}\n{name}: {a.format(name=name)}\n\n" for q, a in examples]
    lines += [f"{human}: {' '.join(earlier.split())}\n" for earlier in notes[:-1]]
    thinking = (
        i18n.text(REPLY_THINKING, language).format(name=name, thought=_short(thought))
        if thought and is_prose(thought)
        else ""
    )
    return i18n.text(REPLY_PROMPT, language).format(
        name=name, nature=nature_of(identity), thinking=thinking, examples="".join(lines), note=" ".join(note.split())
    )


def parse_reply(text: str) -> str | None:
    """The reply in plain words — its first line, cut after its last full sentence if it ran out mid-way — or None."""
    line = next((part.strip() for part in (text or "").split("\n") if part.strip()), "")
    ends = list(_SENTENCE_END.finditer(line))
    if ends and ends[-1].end() < len(line):
        line = line[: ends[-1].end()]
    return line if line and is_prose(line, min_words=2) else None
