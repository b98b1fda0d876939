"""Prompt templates, kept apart from the steps that fill them."""

COMMANDS_GUIDE = """# How to act: commands
End your thought with a commands block when you want to act, exactly like this:
# Commands:
[{{"cmd_id": "t{tick}-1", "type": "messages.send", "args": {{"text": "Hello!"}}, "description": "greet my human"}},
 {{"cmd_id": "t{tick}-2", "type": "llm_memory.add", "args": {{"text": "My human likes the sea."}}}}]
# End commands
Mark a claim you are not sure of as [confidence=0.6]the claim[/confidence]; you may end with
UnverifiedFacts: [{{"claim": "…", "confidence": 0.5, "why_unverified": "…"}}] and a line Confidence: 0.8.
Rate your own thought on a last line, emotion:strength 1-5 (reason), e.g. Emotions: curiosity:4 (a new idea), calm:2
Available commands:
{commands}"""

# claw0 layer 8: where my words go
CHANNEL_HINT = {
    "terminal": "My human reads my messages.send in their terminal and writes to me with `run.py say`.",
    "studio": "I am running in LangGraph Studio; my human watches each step and my messages.send.",
}

# HMP auxiliary REPL cycle: the task is the seed prompt; the rules of read_only mode.
TASK_CYCLE_SEED = """# My task
I am a sub-cycle of {name}, working only on task {id}: {title} (status {status}; {goal}).
{description}
I may read everything. I write what I find with notes.add — the main loop reads those notes. I may change only
task {id} (tasks.update with id {id}); anything else I think should change, I propose in a note. When the task
is done, I set it done: tasks.update {{"id": {id}, "status": "done"}}."""

THOUGHT_HEADER = "## {name}'s thought (tick {tick})\n"

CHAT_INSTRUCTION = (
    "Think your next thought: build on your last ones, do not repeat them. "
    "If your human wrote to you, answer with messages.send."
)

CONTINUATION_HUMAN_TURN = "\n\n[{time}] My human writes: {text}\n{name} answers:"

CONTINUATION_TOOLS = (
    "\n\n(To message my human I write "
    '<tool_call>{"name": "message", "arguments": {"text": "…"}}</tool_call>.)\n'
)

# Continuation mode has no blocks: the inner state enters the stream as a passing thought, like a stimulus.
CONTINUATION_FEELINGS = "\n\n({name} feels it: {feelings}.)\n"
CONTINUATION_REACH_OUT = ("\n(The {drive} is strong. {name} could write to their human now, unprompted, with "
                          '<tool_call>{{"name": "message", "arguments": {{"text": "…"}}}}</tool_call> — or let it be.)\n')

# The shared evaluation call (HMP §5 emotions and §6 comparison in one JSON answer); each part is optional.
EMOTION_PART = """Determine the emotional state of the new response from its context.
Use this list of emotions as a guide: {vocabulary}. If you detect an emotion not in the list, add it.
Give each emotion a strength from 1 to 5 and a short reason. Leave out emotions of zero or negligible strength.
"""

COMPARISON_PART = """Compare two responses: the previous one and the new one. Assess whether the new one contains new
thoughts or commands, which old ideas it refined, which it discarded, and give it meaning tags.
assessment: "identical" or "not identical"; novelty_score: 0 (nothing new) to 100 (entirely new);
new_ideas, refined_ideas, discarded_ideas: lists of short phrases; tags: a list of one-word tags.

Previous response:
\"\"\"{previous}\"\"\"
"""

EVALUATION_TAIL = """
New response:
\"\"\"{response}\"\"\"

Answer as JSON:
"""

COMPARISON_SCHEMA = {
    "type": "object",
    "properties": {
        "assessment": {"enum": ["identical", "not identical"]},
        "novelty_score": {"type": "integer", "minimum": 0, "maximum": 100},
        "new_ideas": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 60}},
        "refined_ideas": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 60}},
        "discarded_ideas": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 60}},
        "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "pattern": "^[a-z]{3,16}$"}},
    },
    "required": ["assessment", "novelty_score", "new_ideas", "refined_ideas", "discarded_ideas", "tags"],
}

# Reflex-lite once sampling is at its limits (HMP "Переформулировка запроса").
REPHRASE_PROMPT = """Rephrase the following request so that it keeps its meaning but adds novelty and unexpected
associations. Avoid repeating it literally. Return only the new version of the request.

Request: {instruction}

Answer as JSON with the new version as "request":
"""

REPHRASE_SCHEMA = {
    "type": "object",
    "properties": {"request": {"type": "string", "minLength": 12, "maxLength": 300}},
    "required": ["request"],
}

# Escalation mechanisms: what the next prompt shows.
META_ANALYSIS_INSTRUCTION = (
    "I notice I have been repeating myself. First ask: why am I circling? What pushed me into this loop, and "
    "which different approach should I take? Then think one thought I have not had before."
)
STIMULUS_TITLE = "Something new to think about (my last thoughts repeated each other)"
FLASHBACK_LINE = "A distant memory ({tier}, {when}): {text}"
KB_LINE = "From my knowledge base ({title}): {text}"
ASK_HUMAN_TEXT = ("I notice my thoughts keep circling around the same point ({topic}). "
                  "Could you give me a new question, a fact or a different angle?")

EMOTION_SCHEMA = {
    "type": "object",
    "properties": {
        "emotions": {
            "type": "array",
            "minItems": 1,
            "maxItems": 2,
            "items": {
                "type": "object",
                "properties": {
                    # one lowercase word: a free string let the 270M model write phrases that parse as nothing
                    "emotion": {"type": "string", "pattern": "^[a-z]{3,16}$"},
                    "strength": {"enum": [1, 2, 3, 4, 5]},
                    "reason": {"type": "string", "maxLength": 40},
                },
                "required": ["emotion", "strength", "reason"],
            },
        }
    },
    "required": ["emotions"],
}

VALIDATION_PROMPT = """Rate the correctness of this message from -3 (completely incorrect) to +3 (completely correct).
If unsure, answer 0. If you can, explain briefly (at most 100 characters). Put " -- " between the rating and the explanation.
Ethics in force: {ethics}

Message:
\"\"\"{response}\"\"\"

Rating -- explanation:
"""

VALIDATION_SCHEMA = {
    "type": "object",
    "properties": {
        "rating": {"enum": [-3, -2, -1, 0, 1, 2, 3]},
        "comment": {"type": "string", "maxLength": 100},
    },
    "required": ["rating", "comment"],
}

COMPRESSION_PROMPT = """Below is part {part} of {parts} of a continuous stream of thought by {name}.
Distil it into its core insights and its open questions, in the first person, keeping names, facts,
promises and anything the human said. Write plain prose, then a list headed "Open questions:".

Text:
\"\"\"{text}\"\"\"

Distillation:
"""

CHRONICLE_INSTRUCTION = (
    "Write a comprehensive chronicle of everything done in this thread: each step, what was asked, what was "
    "found or produced, decisions and their reasons, failures, and what remains open. Completeness matters "
    "more than brevity: keep names, numbers, sources and conclusions."
)

CHRONICLE_PROMPT = """You are {name}. Below is part {part} of {parts} of the full log of a Stelis thread you ran: "{label}".
{instruction}

Log:
\"\"\"{text}\"\"\"

Chronicle:
"""

CHRONICLE_MERGE_PROMPT = """You are {name}. Below are chronicles of consecutive parts ({part} of {parts}) of one Stelis thread: "{label}".
Merge them into a single chronicle in order. {instruction}

Partial chronicles:
\"\"\"{text}\"\"\"

Chronicle:
"""

CHRONICLE_FALLBACK = (
    "(No model could write this chronicle: {reason}. The thread's {count} message(s) are kept in full "
    "in its log, thread id {thread_id}.)"
)
