"""The loop: the driver that ticks (driver.py), what runs around the ticks — sessions, dreams, task sub-cycles
(autonomy.py, task_cycles.py); sessions and start/pause/stop are the managers' (managers/sessions.py, loop.py)."""

from graph.loop.autonomy import Autonomy
from graph.loop.driver import LoopResult, Stopper, idle_should_wake, run_loop

__all__ = ["Autonomy", "LoopResult", "Stopper", "idle_should_wake", "run_loop"]
