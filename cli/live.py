"""The terminal's live view of a run: a status line (tick · step · tokens) while a tick runs; then the thought,
messages to the human, approvals asked for, Stelis threads, dreams and task sub-cycles, and a tick summary.

Everything shown that a model wrote is a bounded preview (`preview`), printed without Rich's highlighter: a 1 MB
answer must not freeze the loop. The full text is in the database (`run.py inspect`)."""

from __future__ import annotations

import json
import time
from types import TracebackType
from typing import Any, Self
from urllib.parse import quote

from rich.console import Console
from rich.markup import escape

from cli.options import LINE_CHARS, console, preview

MESSAGE_CHARS = 2_000


class LiveView:
    """Status line (tick · node · tokens) while a tick runs; a summary, the thought and messages after."""

    def __init__(
        self, persona_name: str, show_thoughts: bool = True, out: Console | None = None, web_url: str | None = None
    ):
        self.name = persona_name
        self.show_thoughts = show_thoughts
        self.out = out or console
        self.web_url = web_url  # the web app beside the loop: a cut thought links to its full text there
        self.status = self.out.status("starting…")
        self.tick = 0
        self.thread: str | None = None
        self.tokens = 0
        self.started = time.perf_counter()
        self.where = "starting"
        self._llm: dict[str, Any] = {}

    def __enter__(self) -> Self:
        self.status.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.status.__exit__(exc_type, exc, traceback)

    def __call__(self, mode: str, data: Any) -> None:
        if mode == "custom":
            event = data.get("event")
            indent = "  " * len(data.get("namespace") or [])
            if event == "token":
                self.tokens += 1
                self.status.update(f"{self.where} · {self.tokens} chunks")
            elif event == "message":
                self.out.print(
                    f"[bold green]{escape(self.name)} → you:[/] {preview(data['text'], MESSAGE_CHARS)}", highlight=False
                )
            elif event == "step":
                self.tokens, self.where = 0, f"{data['node']} ({data['thread_id']})"
                dropped = f" · dropped {'; '.join(data['dropped'])}" if data.get("dropped") else ""
                self.out.print(
                    f"[dim]{indent}▸ {escape(data['node'])} · prompt {data['prompt_tokens']} tokens{escape(dropped)}[/]"
                )
            elif event == "stelis_enter":
                self.out.print(
                    f"[magenta]{indent}⤷ Stelis thread {preview(data['label'])!r} ({preview(data['thread_id'])}) · "
                    f"depth {data['depth']} · window {data['window_tokens']} tokens"
                    f"{' · resumed' if data.get('resumed') else ''}[/]"
                )
            elif event == "stelis_leave":
                why = f" · {preview(data['error'])}" if data.get("error") else ""
                self.out.print(
                    f"[magenta]{indent}⤶ {preview(data['label'])!r} {data['status']} · chronicle "
                    f"{data['chronicle_chars']} chars{why}[/]"
                )
            elif event == "stelis_refused":
                self.out.print(f"[yellow]{indent}✗ {preview(data['error'])}[/]", highlight=False)
            elif event == "dream":
                self._dream(data)
            elif event == "approval":
                self._approval(data)
            elif event == "task_cycle":
                why = f" ({preview(data['reason'])})" if data.get("reason") else ""
                self.out.print(f"[magenta]task {data['task_id']} sub-cycle: {data['status']}{why}[/]", highlight=False)
            elif event == "tick_resumed":  # an interrupted tick goes on: its opening step does not run again
                self.tick, self.thread = data.get("tick") or self.tick, data.get("thread_id") or self.thread
                self.tokens, self.started = 0, time.perf_counter()
                self.out.print(f"[dim]tick {self.tick} resumes where it was interrupted[/]")
            elif event == "tick_failed":
                where = f" in {data['step']}" if data.get("step") else ""
                self.out.print(
                    f"[red]tick {data['tick']} failed{where}: {preview(data['error'])} — its output is "
                    "quarantined; the next tick starts clean[/]",
                    highlight=False,
                )
            return
        if "update_drives" in data and (data["update_drives"] or {}).get("drives", {}).get("reach_out"):
            offer = data["update_drives"]["drives"]["reach_out"]
            self.out.print(
                f"[yellow]{escape(self.name)} feels {offer['drive']} ({offer['level']:.2f}) and may write to you[/]"
            )
        for node, update in data.items():
            update = update or {}
            if node == "update_process_log":
                self.tick, self.tokens, self.started = update.get("tick", self.tick), 0, time.perf_counter()
                self.thread = update.get("thread_id") or self.thread
            self.where = f"tick {self.tick} · {node}"
            self.status.update(f"{self.where} done")
            if node == "call_llm" and self.show_thoughts:
                llm = update.get("llm") or {}
                if update.get("degraded"):
                    self.out.print(f"[red]tick {self.tick}: no LLM answered — degraded mode, retrying with backoff[/]")
                elif llm:
                    text = (update.get("response") or "").strip()  # cut by preview, which counts what it leaves out
                    shown = preview(text).replace("\n", " ")
                    more = f" — full text: {escape(self._full_text())}" if len(text) > LINE_CHARS else ""
                    self.out.print(f"[dim]{shown}{more}[/]", highlight=False)
                    self._llm = llm
            if node == "execute_commands":
                self._summary(update)

    def _full_text(self) -> str:
        """Where this tick's whole thought can be read."""
        if self.web_url and self.thread:
            return f"{self.web_url}/api/ticks/{quote(self.thread, safe='')}/{self.tick}"
        return "run.py inspect --json"

    def _dream(self, data: dict[str, Any]) -> None:
        phase = data.get("phase")
        if phase == "gathered":
            self.status.update(f"dreaming (level {data['level']}) · {data.get('material_chars', 0)} chars of material")
            self.out.print(
                f"[blue]☾ {escape(self.name)} falls asleep: level-{data['level']} dream "
                f"({escape(str(data.get('reason') or 'on demand'))})[/]"
            )
        elif phase == "applied" and data.get("insight"):
            changes = ", ".join(
                filter(
                    None,
                    [
                        f"goals {', '.join(data['goals'])}" if data.get("goals") else "",
                        f"{len(data.get('questions_added') or [])} new question(s)"
                        if data.get("questions_added")
                        else "",
                        f"entities {', '.join(data['entities'])}" if data.get("entities") else "",
                    ],
                )
            )
            self.out.print(
                f"[blue]☀ insight: {preview(data['insight'], 300)}\n  strategy: {preview(data['strategy'], 200)}"
                f"{'  · ' + preview(changes) if changes else ''}[/]",
                highlight=False,
            )
        elif phase in ("applied", "postponed"):
            self.out.print(
                f"[yellow]dream: {preview(data.get('status'))} {preview(data.get('error') or data.get('dropped') or '')}[/]",  # noqa: E501
                highlight=False,
            )

    def _approval(self, data: dict[str, Any]) -> None:
        if not data.get("new"):
            return  # already asked: the human has it in `run.py approvals`
        args = json.dumps(data.get("args") or {}, ensure_ascii=False)
        self.out.print(
            f"[bold yellow]{escape(self.name)} asks to run {preview(data['type'], 80)} {preview(args, 200)}[/] "
            f"[yellow]({preview(data.get('reason') or '')}) — run.py approve {data['approval_id']} "
            f"or run.py deny {data['approval_id']} --reason …[/]",
            highlight=False,
        )

    def _summary(self, update: dict[str, Any]) -> None:
        llm = self._llm
        parts = [f"tick {self.tick}", f"{time.perf_counter() - self.started:.1f}s"]
        if llm:
            parts.append(
                f"{llm.get('tokens_per_s', 0):.0f} tok/s ({llm.get('completion_tokens', 0)} tok, {llm.get('llm_id')})"
            )
        statuses = [f"{e['type'][:80]}:{e['status']}" for e in update.get("executed") or []]
        if statuses:
            parts.append("commands " + ", ".join(statuses))
        if update.get("idle"):
            parts.append("IDLE")
        self.out.print("[cyan]" + preview(" │ ".join(parts), 1_000) + "[/]", highlight=False)
