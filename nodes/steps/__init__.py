"""The REPL tick (HMP's REPL cycle), one LangGraph node per step, in the order the tick runs them:

    s01 update_process_log   open the tick; close the processes the model has seen
    s02 update_drives        the persona takes stock: drives, the human's mood, answered questions
    s03 compress_context     continuation mode: distil the growing text when it is too long
    s04 prepare_context      the prompt, under the thread's token budget (untrusted input fenced as data)
    s05 call_llm             one model call, failing over by priority; no answer → degraded
    s06 extract_commands     commands in any syntax, confidence marks, the model's own emotions
        send_answer          a tick that answers someone sends its messages now (before the reflexes' calls)
    s07 evaluate_emotion     reflex: emotions and the cheap novelty signals (one LLM call at most)
    s08 check_stagnation     reflex: anti-stagnation — reflex-lite, diagnosis, escalation
    s09 validate_output      reflex: the validators' rating
    s10 write_memory         the thought and its reflex fields, stored
    s11 manage_memory        abstracts, episodes, pruning
    s12 execute_commands     approved commands, then this tick's, through the consent gate; close the tick
A degraded tick (no model answered) goes from call_llm straight to execute_commands (a conditional edge in the
playbooks), so no step after it needs to ask; a free thought cut because a human wrote (`after_call: preempted`)
goes back to prepare_context. While a human's note waits, no step starts a side call (nodes/attention.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nodes.steps.s01_update_process_log import update_process_log
from nodes.steps.s02_update_drives import update_drives
from nodes.steps.s03_compress_context import compress_context
from nodes.steps.s04_prepare_context import prepare_context
from nodes.steps.s05_call_llm import call_llm
from nodes.steps.s06_extract_commands import extract_commands
from nodes.steps.s06_send_answer import send_answer
from nodes.steps.s07_evaluate_emotion import evaluate_emotion
from nodes.steps.s08_check_stagnation import check_stagnation
from nodes.steps.s09_validate_output import validate_output
from nodes.steps.s10_write_memory import write_memory
from nodes.steps.s11_manage_memory import manage_memory
from nodes.steps.s12_execute_commands import execute_commands

TICK_STEPS: dict[str, Callable[..., Any]] = {
    "update_process_log": update_process_log,
    "update_drives": update_drives,
    "compress_context": compress_context,
    "prepare_context": prepare_context,
    "call_llm": call_llm,
    "extract_commands": extract_commands,
    "send_answer": send_answer,
    "evaluate_emotion": evaluate_emotion,
    "check_stagnation": check_stagnation,
    "validate_output": validate_output,
    "write_memory": write_memory,
    "manage_memory": manage_memory,
    "execute_commands": execute_commands,
}
