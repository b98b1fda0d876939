"""The tick's state: small, JSON-serialisable, checkpointed after every step.

Memories live in the database, never here; only ids, the rendered prompt, the raw response, parsed
commands, reflex results, sampling parameters and mode flags.
"""

from __future__ import annotations

from typing import Annotated, Any

from typing_extensions import TypedDict


def merge_vars(current: dict[str, Any] | None, update: dict[str, Any] | None) -> dict[str, Any]:
    return {**(current or {}), **(update or {})}


class TickState(TypedDict, total=False):
    thread_id: str  # the database thread this graph writes to (a Stelis child has its own)
    root_thread: str  # the thread the run started on (command-opened children run inside it)
    run_id: str  # one-shot playbooks: distinguishes runs on the same thread
    tick: int
    mode: str  # chat | continuation
    vars: Annotated[dict[str, Any], merge_vars]  # playbook variables: inputs, llm outputs, set assignments
    # update_drives
    drives: dict[str, Any]  # levels, dominant, details, and the reach-out offer if one was made this tick
    # prepare_context
    prompt: str
    prompt_messages: list[dict[str, str]]
    prompt_tokens: int
    context_report: dict[str, Any]
    incoming_note_ids: list[int]
    human_turns: list[str]  # continuation mode: the marked human turns appended to the text
    shown_process_ids: list[int]
    # call_llm
    response: str
    llm: dict[str, Any]
    native_tool_calls: list[dict[str, Any]]
    degraded: bool
    degraded_ticks: int  # consecutive ticks no LLM answered (kept across ticks; 0 once one answers)
    # extract_commands
    thought: str  # the response without its commands block / tool calls
    commands: list[dict[str, Any]]
    parse_errors: list[str]
    confidence: float | None
    unverified_facts: list[dict[str, Any]]
    self_emotions: list[str]  # the model's own `Emotions:` line, if it wrote one
    # reflexes
    emotions: list[str]
    emotion_eval: dict[str, Any]  # {source: self|llm|carried, llm_id, llm_mismatch, carried_from}
    novelty_signals: dict[str, Any]  # cheap signals (n-gram, embedding) and the LLM comparison, if one was made
    novelty: dict[str, Any]
    validation: dict[str, Any]
    # write_memory / execute_commands
    response_id: int | None
    executed: list[dict[str, Any]]
    memory_upkeep: dict[str, Any]  # what manage_memory did this tick (abstract id, pruning counts)
    # loop control (persisted across ticks)
    sampling: dict[str, float]
    base_sampling: dict[str, float]
    stagnation: dict[str, Any]  # the anti-stagnation episode in progress: streak, diagnosis, mechanisms, stimulus
    pause_s: float
    idle: bool
    error: str | None


def tick_key(state: TickState) -> str:
    return f"{state.get('thread_id', 'main')}:{state.get('tick', 0)}"
