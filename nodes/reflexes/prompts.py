"""Prompt templates and answer schemas of the reflexes (emotion, comparison, reflex-lite, escalation, validation)."""

from typing import Any

from i18n import N_

# The shared evaluation call (HMP's emotions and novelty comparison in one JSON answer); each part is optional.
EMOTION_PART = N_("""Determine the emotional state of the new response from its context.
Use this list of emotions as a guide: {vocabulary}. If you detect an emotion not in the list, add it.
Give each emotion a strength from 1 to 5 and a short reason. Leave out emotions of zero or negligible strength.
""")

COMPARISON_PART = N_("""Compare two responses: the previous one and the new one. Assess whether the new one contains new
thoughts or commands, which old ideas it refined, which it discarded, and give it meaning tags.
assessment: "identical" or "not identical"; novelty_score: 0 (nothing new) to 100 (entirely new);
new_ideas, refined_ideas, discarded_ideas: lists of short phrases; tags: a list of one-word tags.

Previous response:
\"\"\"{previous}\"\"\"
""")

EVALUATION_TAIL = N_("""
New response:
\"\"\"{response}\"\"\"

Answer as JSON:
""")

COMPARISON_SCHEMA: dict[str, Any] = {
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
REPHRASE_PROMPT = N_("""Rephrase the following request so that it keeps its meaning but adds novelty and unexpected
associations. Avoid repeating it literally. Return only the new version of the request.

Request: {instruction}

Answer as JSON with the new version as "request":
""")

REPHRASE_SCHEMA = {
    "type": "object",
    "properties": {"request": {"type": "string", "minLength": 12, "maxLength": 300}},
    "required": ["request"],
}

# Escalation mechanisms: what the next prompt shows.
META_ANALYSIS_INSTRUCTION = N_(
    "I notice I have been repeating myself. First ask: why am I circling? What pushed me into this loop, and "
    "which different approach should I take? Then think one thought I have not had before."
)
RATIONALE_INSTRUCTION = N_(
    "Why am I repeating this thought? What prompted it — a note, a memory, a habit? Name the cause in one sentence "
    "before going on."
)
GOAL_REFORMULATION_INSTRUCTION = N_(
    "My goal {id} (“{title}”) may be too vague or too big to move. Restate it simpler or more precisely "
    '(goals.update {{"id": {id}, "title": "…"}}) and name its first concrete step.'
)
TASK_SWITCH_INSTRUCTION = N_(
    "I set task {current} (“{current_title}”) aside for now and turn to task {other} (“{other_title}”); I come "
    "back to task {current} once my thoughts move again."
)
TASK_RETURN_LINE = N_("My thoughts move again: back to task {id} (“{title}”), which I set aside during the loop.")
RANDOM_ITERATION_INSTRUCTION = N_("A way of thinking drawn at random ({name}): {instruction}")
INTEREST_LINE = N_("A topic I have not come back to for a while: #{tag} ({uses} entries): {example}")
WORLD_LINE = N_("News from outside (a feed): {text}")
WORLD_NOTHING_LINE = N_("My feeds have nothing new: more of them will not help now; I change the topic instead.")
WORLD_ASKED_LINE = N_('I asked for fresh news from my feeds; they arrive as notes (notes.list {"source": "feed"}).')
STIMULUS_TITLE = N_("Something new to think about (my last thoughts repeated each other)")
FLASHBACK_LINE = N_("A distant memory ({tier}, {when}): {text}")
KB_LINE = N_("From my knowledge base ({title}): {text}")
MESH_QUESTION = N_(
    "My thoughts keep circling around the same point ({topic}). Tell me something new: what would you explore now?"
)
MESH_ASKED_LINE = N_(
    "I asked {peers} peer(s) on the mesh what they would explore now ({how}); their answers arrive as notes from peers."
)
MESH_NONE_LINE = N_("I wanted to ask the mesh for something new, but {reason}; I try something else instead.")
SIMULATION_LINE = N_(
    "I moved “{title}” into a simulated environment (Stelis thread {thread}): I rehearse it there, "
    "where nothing I do leaves the rehearsal, and its chronicle comes back here."
)
SIMULATION_REFUSED_LINE = N_("I could not move “{title}” into a simulated environment: {reason}.")
SIMULATION_SEED = N_("""# A simulated environment
This thread is a rehearsal of “{title}” in a simulated environment, opened because my thinking was stuck in a loop.
Nothing I do here leaves it: commands that would reach outside me or change who I am are simulated, not run. I
describe the situation as a small world, try the next step of the task in it, imagine how the world answers, and
note what I learn. After {ticks} thoughts this rehearsal ends and its chronicle returns to my main thread.""")
SIMULATION_CHRONICLE = N_(
    "Record what was rehearsed in this simulated environment: the situation imagined, each step "
    "tried, how the simulated world answered, and what was learned for the real task."
)
ASK_HUMAN_TEXT = N_(
    "I notice my thoughts keep circling around the same point ({topic}). "
    "Could you give me a new question, a fact or a different angle?"
)

EMOTION_SCHEMA: dict[str, Any] = {
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

VALIDATION_PROMPT = N_("""Rate the correctness of this message from -3 (completely incorrect) to +3 (completely \
correct).
If unsure, answer 0. If you can, explain briefly (at most 100 characters). Put " -- " between the rating and the \
explanation.
Ethics in force: {ethics}

Message:
\"\"\"{response}\"\"\"

Rating -- explanation:
""")

VALIDATION_SCHEMA = {
    "type": "object",
    "properties": {
        "rating": {"enum": [-3, -2, -1, 0, 1, 2, 3]},
        "comment": {"type": "string", "maxLength": 100},
    },
    "required": ["rating", "comment"],
}

# The ethics model and its audit (HMP context 1: ethics.yaml's model_type, model_weights and audit_json, "added to the
# request so that all reasoning and validation take the norms in force into account"; persona/ethics.py)
ETHICS_MODEL_LINE = N_("My ethics model: {model}.")
ETHICS_WEIGHTS_LINE = N_("The weight of each consideration in it: {weights}.")
ETHICS_AUDIT_ALL = N_("Every command of a thought my validators rate is audited with this model.")
ETHICS_AUDIT_DIARY = N_("Each of my ethics decisions is also written into my diary.")
ETHICS_AUDIT_OTHER = N_("Audit settings: {settings}.")
VALIDATOR_ETHICS_MODEL = N_("ethics model {model}, weighing {weights}")

# Isolated Mode and Emergency Consensus (HMP; managers/mesh.py), in the prompt while the mesh is unreachable
ISOLATED_TITLE = N_("The mesh")
ISOLATED_LINE = N_(
    "I am in Isolated Mode since {since}: no peer of my mesh is reachable ({why}). {queued} "
    "container(s) wait in my outbox; sync and the mesh's consensus wait until a peer is back."
)
ISOLATED_WHY_DOOR = N_("my mesh door could not start")
ISOLATED_WHY_PEERS = N_("none answers")
EMERGENCY_LINE = N_(
    "Until then I decide on my own ethics and memory (Emergency Consensus): a decision I would have put "
    "to the mesh I note in my diary with the tag emergency_consensus, to be reviewed when the mesh "
    "returns (my validators' ethics decisions and the cases I open are marked so on their own)."
)

# The notes an auto-mode tick leaves unshown (HMP context 6's filter: nodes/steps/s04_prepare_context/filters.py)
HELD_LINE = N_(
    "{held} more unread note(s) are not shown now: my notes filter ({filter}) holds them back, or they wait "
    'for a later tick. notes.list shows them; cycle.mode {{"mode": "auto", "filter": {{}}}} lifts the filter.'
)
