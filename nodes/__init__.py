"""The steps of the tick. The compiler finds them through `STEPS`; a step never imports the compiler."""

from __future__ import annotations

from typing import Callable

from nodes.call_llm import call_llm
from nodes.check_stagnation import check_stagnation
from nodes.compress_context import compress_context
from nodes.context import AnimaContext, Services, TickSettings
from nodes.dream import apply_dream, dream, gather_dream, summarise_days
from nodes.evaluate_emotion import evaluate_emotion
from nodes.execute_commands import execute_commands
from nodes.extract_commands import extract_commands
from nodes.manage_memory import manage_memory
from nodes.prepare_context import prepare_context
from nodes.state import TickState
from nodes.update_drives import update_drives
from nodes.update_process_log import update_process_log
from nodes.validate_output import validate_output
from nodes.write_memory import write_memory

STEPS: dict[str, Callable] = {
    "update_process_log": update_process_log,
    "update_drives": update_drives,
    "compress_context": compress_context,
    "prepare_context": prepare_context,
    "call_llm": call_llm,
    "extract_commands": extract_commands,
    "evaluate_emotion": evaluate_emotion,
    "check_stagnation": check_stagnation,
    "validate_output": validate_output,
    "write_memory": write_memory,
    "manage_memory": manage_memory,
    "execute_commands": execute_commands,
    "gather_dream": gather_dream,
    "dream": dream,
    "apply_dream": apply_dream,
    "summarise_days": summarise_days,
}

__all__ = ["STEPS", "AnimaContext", "Services", "TickSettings", "TickState"]
