"""Prompt templates of Stelis chronicles."""

from i18n import N_

CHRONICLE_INSTRUCTION = N_(
    "Write a comprehensive chronicle of everything done in this thread: each step, what was asked, what was "
    "found or produced, decisions and their reasons, failures, and what remains open. Completeness matters "
    "more than brevity: keep names, numbers, sources and conclusions."
)

CHRONICLE_PROMPT = N_("""You are {name}. Below is part {part} of {parts} of the full log of a Stelis thread you ran: \
"{label}".
{instruction}

Log:
\"\"\"{text}\"\"\"

Chronicle:
""")

CHRONICLE_MERGE_PROMPT = N_("""You are {name}. Below are chronicles of consecutive parts ({part} of {parts}) of one \
Stelis thread: "{label}".
Merge them into a single chronicle in order. {instruction}

Partial chronicles:
\"\"\"{text}\"\"\"

Chronicle:
""")

CHRONICLE_FALLBACK = N_(
    "(No model could write this chronicle: {reason}. The thread's {count} message(s) are kept in full "
    "in its log, thread id {thread_id}.)"
)
