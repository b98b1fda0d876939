"""The tick's state: small, typed, checkpointed. One typed report per concern, written by the step that owns it.

Memories live in the database, never here: only ids, the rendered prompt, the raw response, parsed commands,
reflex results, sampling parameters and mode flags. Every value is plain JSON (a checkpoint stores dicts and
lists, never our classes); the reports are TypedDicts so each field is named. A report is `{}` until its step
has run in the current tick (`update_process_log` empties them at the start of every tick).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal, get_origin, get_type_hints

from typing_extensions import TypedDict

from memory.provenance import Source


def merge_vars(current: dict[str, Any] | None, update: dict[str, Any] | None) -> dict[str, Any]:
    return {**(current or {}), **(update or {})}


class SamplingParams(TypedDict, total=False):
    temperature: float
    top_p: float
    top_k: int
    min_p: float
    repeat_penalty: float
    presence_penalty: float
    frequency_penalty: float
    max_tokens: int


class ReachOut(TypedDict):
    at: str
    tick: int
    thread: str
    drive: str
    level: float


class DrivesReport(TypedDict, total=False):
    """update_drives: the four drive levels and the reach-out offer (persona/drives.py)."""

    levels: dict[str, float]
    dominant: str
    level: float  # the dominant drive's
    details: dict[str, Any]
    at: str
    inject_at: float
    reach_out: ReachOut | None
    reach_out_blocked: str | None
    resolved_questions: list[int]
    purged_questions: int
    error: str


class PromptLayer(TypedDict):
    layer: str
    items: int
    tokens: int
    system: bool


class ContextReport(TypedDict, total=False):
    """update_process_log and prepare_context: what the prompt holds and what was left out."""

    processes_closed: int
    processes_timed_out: list[int]
    window_tokens: int
    budget_tokens: int
    max_tokens: int
    dropped: list[str]
    notes: list[int]
    processes: list[int]
    recalled: list[int]
    recall_error: str | None
    layers: list[PromptLayer]
    compressed: dict[str, int]
    language: str  # the language of the prompt's fixed texts (the human's: s04_prepare_context/language.py)


class AudienceDict(TypedDict, total=False):
    """prepare_context: whom the tick answers (managers/audience.py `Audience.as_dict`); {} is the persona alone."""

    role: str  # self | owner | trusted | guest | peer
    person_id: int | None
    peer: str | None
    name: str


class LLMCallReport(TypedDict, total=False):
    """call_llm: who answered and what it cost."""

    llm_id: str
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    tokens_per_s: float
    failed_over_from: list[str]


class ReplyReport(TypedDict, total=False):
    """call_llm's reply turn (persona/voice.py): the notes it answered, its reply, or why it did not run."""

    notes: list[int]
    attempts: int
    llm_id: str
    text: str
    skipped: str
    error: str


class CommandDict(TypedDict, total=False):
    cmd_id: str
    type: str
    args: dict[str, Any]  # checked against the command's model (nodes/commands/args.py)
    description: str
    syntax: str
    error: str  # set when refused before the gate (unknown type, bad arguments): it never runs
    status: str  # unknown | invalid, with error


class ExecutedCommand(TypedDict, total=False):
    cmd_id: str
    type: str
    status: (
        str  # executed | failed | unvalidated | pending_approval | refused | unknown | invalid | blocked | withdrawn
    )
    result: str
    already_done: bool
    approval_id: int


class UnverifiedFactDict(TypedDict, total=False):
    claim: str
    context: str
    confidence: float
    sources: list[str]
    why_unverified: str
    priority: int
    origin: str


class EmotionEval(TypedDict, total=False):
    """evaluate_emotion: where the rating came from (self | llm | carried | lexicon | signals)."""

    source: str
    llm_id: str | None
    llm_mismatch: bool
    carried_from: int


class Comparison(TypedDict):
    assessment: str
    novelty_score: float
    new_ideas: list[str]
    refined_ideas: list[str]
    discarded_ideas: list[str]
    tags: list[str]


class NoveltySignals(TypedDict, total=False):
    """evaluate_emotion: the cheap novelty signals, and the LLM comparison when one was asked."""

    similarity: float
    ngram: float
    semantic: float | None
    band: Literal["new", "uncertain", "stagnant"]
    compared_with: int
    similar_to_tick: int | None
    similar_to_id: int | None
    comparison: Comparison | None


class NoveltyReport(TypedDict, total=False):
    """check_stagnation: the anti-stagnation reflex's verdict and what it did."""

    novelty_score: float
    max_similarity: float
    method: str
    ngram_similarity: float
    semantic_similarity: float | None
    llm_novelty: float | None
    comparison: Comparison | None
    reflection: str | None
    tags: list[str]
    compared_with: int
    similar_to_tick: int | None
    stagnation_flag: bool
    stagnation_reason: str | None
    graph_idle: bool  # the concept graph has not grown in `reflexes.graph_idle_ticks` (read only when it matters)
    degenerate: str | None  # why the output is no thought in words (persona/prose.py), or None
    repeated: bool
    triggered_actions: list[str]
    streak: int
    diagnosis: str | None
    mechanisms: list[str]
    dynamics: str
    anxiety_streak: int
    skipped: str


class StagnationEpisode(TypedDict, total=False):
    """The anti-stagnation episode in progress (kept across ticks until novelty returns)."""

    streak: int
    diagnosis: str
    mechanisms: list[str]
    stimulus: list[str]
    stimulus_sources: list[Source]  # the untrusted text among them (memory/provenance.py)
    recalled_before: list[int]
    instruction: str
    rephrased: str
    rephrase_asked_at: int  # the streak at which a rephrase was last asked for
    context_mode: str
    llm: str | None
    pause_s: float
    asked_human: int
    flashback_item: int
    kb_item: int
    world_item: int  # the feed note the world check brought up
    world_asked: bool  # the world check asked for a fetch in this episode
    task_switch: dict[str, Any]  # {from, from_title, to}: the task set aside, due again when the loop ends
    thinking_method: str  # drawn by the random iteration
    interest_tag: str  # the topic interest memory brought back
    plan: list[str]  # the escalation's order, fixed for the episode
    added: list[str]  # the mechanisms the last escalation added (credited if novelty comes back next)
    mesh_asked: dict[str, str]  # ask_mesh: peer DID -> the container sent, or the approval it waits in
    mesh_unavailable: str  # why ask_mesh had no peer to ask (said in the stimulus)
    simulation: str  # the Stelis thread the task was moved into (or why it could not be)


class Vote(TypedDict, total=False):
    LLM: str
    id: str
    rating: int | None
    comment: str
    trust: float
    trust_after: float
    ms: float  # how long the validator took to answer


class ValidationReport(TypedDict, total=False):
    """validate_output: the validators' rating (or auto_pass when there are none)."""

    auto_pass: bool
    self_validation: bool
    rating: float | None
    distribution: dict[str, int]
    validators: list[Vote]
    passed: bool
    threshold: float
    tie_break: str | None
    mean: float  # the trust-weighted mean (the rating unless the weighted majority decided)
    agreement: float | None  # how far the votes agree, 0..1 (HMP's accuracy; nodes/reflexes/validation.py)
    arbitration: str | None  # the weighted majority that decided when they agreed too little
    strict_by: float  # added to every command's rating threshold this tick (low novelty)
    stricter: str  # why
    skipped: str
    violation: bool
    ethics: dict[str, Any]  # an ethics decision (a violation, whatever the policy): Ethics.decision_record
    emergency_consensus: int  # the diary entry of an ethics decision taken in Isolated Mode


class MemoryUpkeep(TypedDict, total=False):
    """manage_memory: what the upkeep did this tick."""

    abstract: int | str | None
    episode: str
    manager: dict[str, Any] | str


@dataclass
class TickState:
    thread_id: str = ""  # the database thread this graph writes to (a Stelis child has its own)
    root_thread: str = ""  # the thread the run started on (command-opened children run inside it)
    run_id: str = ""  # one-shot playbooks: distinguishes runs on the same thread
    tick: int = 0
    mode: str = "chat"  # chat | continuation
    vars: Annotated[dict[str, Any], merge_vars] = field(default_factory=dict)  # playbook variables
    # update_drives
    drives: DrivesReport = field(default_factory=DrivesReport)
    # prepare_context
    prompt: str = ""
    prompt_messages: list[dict[str, str]] = field(default_factory=list)
    prompt_tokens: int = 0
    context_report: ContextReport = field(default_factory=ContextReport)
    incoming_note_ids: list[int] = field(default_factory=list)
    human_turns: list[str] = field(default_factory=list)  # continuation mode: the marked human turns
    shown_process_ids: list[int] = field(default_factory=list)
    untrusted: list[Source] = field(default_factory=list)  # where untrusted text in the prompt came from
    audience: AudienceDict = field(default_factory=AudienceDict)  # whom the tick answers ({}: the persona alone)
    # call_llm
    after_call: str = ""  # answered | degraded | preempted (a free thought cut: a human's note came; s04 again)
    response: str = ""
    llm: LLMCallReport = field(default_factory=LLMCallReport)
    native_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    degraded: bool = False
    degraded_ticks: int = 0  # consecutive ticks no LLM answered (kept across ticks; 0 once one answers)
    # extract_commands
    thought: str = ""  # the response without its commands block / tool calls
    commands: list[CommandDict] = field(default_factory=list)
    parse_errors: list[str] = field(default_factory=list)
    confidence: float | None = None
    unverified_facts: list[UnverifiedFactDict] = field(default_factory=list)
    self_emotions: list[str] = field(default_factory=list)  # the model's own `Emotions:` line
    # call_llm's reply turn (reply_to_note)
    reply: ReplyReport = field(default_factory=ReplyReport)
    # reflexes
    emotions: list[str] = field(default_factory=list)
    emotion_eval: EmotionEval = field(default_factory=EmotionEval)
    novelty_signals: NoveltySignals = field(default_factory=NoveltySignals)
    novelty: NoveltyReport = field(default_factory=NoveltyReport)
    validation: ValidationReport = field(default_factory=ValidationReport)
    # write_memory, manage_memory, execute_commands
    response_id: int | None = None
    memory_upkeep: MemoryUpkeep = field(default_factory=MemoryUpkeep)
    executed: list[ExecutedCommand] = field(default_factory=list)
    # loop control (kept across ticks)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    base_sampling: SamplingParams = field(default_factory=SamplingParams)
    stagnation: StagnationEpisode = field(default_factory=StagnationEpisode)
    pause_s: float = 0.0
    idle: bool = False
    error: str | None = None


STATE_FIELDS = frozenset(f.name for f in fields(TickState))


def _reducers() -> dict[str, Callable[[Any, Any], Any]]:
    hints = get_type_hints(TickState, include_extras=True)
    return {
        name: meta
        for name, hint in hints.items()
        if get_origin(hint) is Annotated
        for meta in hint.__metadata__
        if callable(meta)
    }


STATE_REDUCERS = _reducers()  # field → its reducer (`Annotated[…, reducer]`), as LangGraph's channels apply them


class TickValues(TypedDict, total=False):
    """The state as its checkpoint holds it (`Agent.state()`, `Agent.tick()`): TickState's fields as a dict, field
    by field (tests/unit/test_state_types.py keeps the two the same). Empty before the first tick."""

    thread_id: str
    root_thread: str
    run_id: str
    tick: int
    mode: str
    vars: dict[str, Any]
    drives: DrivesReport
    prompt: str
    prompt_messages: list[dict[str, str]]
    prompt_tokens: int
    context_report: ContextReport
    incoming_note_ids: list[int]
    human_turns: list[str]
    shown_process_ids: list[int]
    untrusted: list[Source]
    audience: AudienceDict
    after_call: str
    response: str
    llm: LLMCallReport
    native_tool_calls: list[dict[str, Any]]
    degraded: bool
    degraded_ticks: int
    thought: str
    commands: list[CommandDict]
    parse_errors: list[str]
    confidence: float | None
    unverified_facts: list[UnverifiedFactDict]
    self_emotions: list[str]
    reply: ReplyReport
    emotions: list[str]
    emotion_eval: EmotionEval
    novelty_signals: NoveltySignals
    novelty: NoveltyReport
    validation: ValidationReport
    response_id: int | None
    memory_upkeep: MemoryUpkeep
    executed: list[ExecutedCommand]
    sampling: SamplingParams
    base_sampling: SamplingParams
    stagnation: StagnationEpisode
    pause_s: float
    idle: bool
    error: str | None


# What each step of the tick returns: the state keys it writes, typed as TickState declares them (LangGraph merges
# the returned dict into the state as before). update_process_log opens the tick and may write any key (TickValues).


class VarsUpdate(TypedDict, total=False):
    """The playbook's own nodes (llm, set, subplaybook, stelis, dream steps): the variables they set, merged."""

    vars: dict[str, Any]


class DrivesUpdate(TypedDict, total=False):
    """update_drives (s02)."""

    drives: DrivesReport


class CompressionUpdate(TypedDict, total=False):
    """compress_context (s03)."""

    context_report: ContextReport


class PromptUpdate(TypedDict, total=False):
    """prepare_context (s04)."""

    prompt: str
    prompt_messages: list[dict[str, str]]
    prompt_tokens: int
    incoming_note_ids: list[int]
    human_turns: list[str]
    shown_process_ids: list[int]
    untrusted: list[Source]
    context_report: ContextReport
    audience: AudienceDict


class AnswerUpdate(TypedDict, total=False):
    """call_llm (s05): the model's answer (also kept with the tick's row), or its reply turn."""

    after_call: str
    response: str
    native_tool_calls: list[dict[str, Any]]
    parse_errors: list[str]
    degraded: bool
    degraded_ticks: int
    incoming_note_ids: list[int]
    llm: LLMCallReport
    error: str | None
    reply: ReplyReport
    commands: list[CommandDict]


class CommandsUpdate(TypedDict, total=False):
    """extract_commands (s06)."""

    thought: str
    commands: list[CommandDict]
    parse_errors: list[str]
    confidence: float | None
    unverified_facts: list[UnverifiedFactDict]
    self_emotions: list[str]


class EmotionUpdate(TypedDict, total=False):
    """evaluate_emotion (s07)."""

    emotions: list[str]
    emotion_eval: EmotionEval
    novelty_signals: NoveltySignals


class StagnationUpdate(TypedDict, total=False):
    """check_stagnation (s08)."""

    novelty: NoveltyReport
    sampling: SamplingParams
    stagnation: StagnationEpisode


class ValidationUpdate(TypedDict, total=False):
    """validate_output (s09)."""

    validation: ValidationReport


class WriteMemoryUpdate(TypedDict, total=False):
    """write_memory (s10)."""

    response_id: int | None


class UpkeepUpdate(TypedDict, total=False):
    """manage_memory (s11)."""

    memory_upkeep: MemoryUpkeep


class ExecutionUpdate(TypedDict, total=False):
    """execute_commands (s12): what ran, and the loop's pause before the next tick."""

    executed: list[ExecutedCommand]
    pause_s: float
    idle: bool


def state_from(values: Mapping[str, Any]) -> TickState:
    """A TickState from a checkpoint's values (`Agent.state()`), for calling a step outside the graph."""
    return TickState(**{name: value for name, value in values.items() if name in STATE_FIELDS})


def state_values(state: TickState) -> dict[str, Any]:
    """The state's fields as a dict (shallow: the reports are shared, not copied)."""
    return {name: getattr(state, name) for name in STATE_FIELDS}


def tick_key(state: TickState) -> str:
    return f"{state.thread_id or 'main'}:{state.tick}"
