"""anima's command line (typer). One module per command family; this page wires them, and `COMMANDS` says where each
command lives — its module is imported only when the command runs (cli/lazy.py), so `run.py say …` does not import
the loop, the web app or the models:

    run.py [--playbook repl] …      run_playbook.py   the persona's loop, a one-shot playbook; `dream`
    run.py say "…"                  talk.py           a note to the persona
    run.py serve                    web.py            the web app and API alone (the loop serves it too)
    run.py mcp                      mcp.py            the persona as an MCP server over stdio (the web app: /mcp)
    run.py inspect [--json]         inspect.py        what it did and is (graph/reports.py)
    run.py approvals / approve / deny  approvals.py   the human's side of consent
    run.py tainted / trust          approvals.py      rows written from untrusted text; trusting one
    run.py sessions …               sessions.py       list, export, revive
    run.py users …                  users.py          the persona's people, contact requests
    run.py peers …                  peers.py          the peers, the credentials they call with and the ones they gave
    run.py kb …                     kb.py             the knowledge base
    run.py memory anonymise|deanonymise  memory.py    names and places in memory → placeholders, and back (owner)
    run.py persona new|show         persona.py        persona directories and their prompt
    run.py playbook check|schema|draw  playbook.py    the playbook language
    run.py model install            model.py          the embedded model
    run.py worker / personas …      fleet.py          many personas: the job engine's workers, the registry
    run.py llm list|select|update   llm.py            the models chosen at run time
    run.py spawn NAME --mode …      spawn.py          a child persona (clone, trained, newborn)
    run.py config show [--json]     config.py         every effective setting and where it came from
"""

from __future__ import annotations

import typer

from cli.run_playbook import run_playbook
from cli.startup import AnimaGroup, with_debug_option

# name → "module:attribute": a command function, or a command family's typer app (`run.py NAME --help` shows it);
# in the order `run.py --help` lists them
COMMANDS = {
    "dream": "cli.run_playbook:dream",
    "say": "cli.talk:say",
    "serve": "cli.web:serve",
    "mcp": "cli.mcp:mcp",
    "spawn": "cli.spawn:spawn",
    "inspect": "cli.inspect:inspect",
    "approvals": "cli.approvals:approvals",
    "approve": "cli.approvals:approve",
    "deny": "cli.approvals:deny",
    "tainted": "cli.approvals:tainted",
    "trust": "cli.approvals:trust",
    "worker": "cli.fleet:worker",
    "sessions": "cli.sessions:app",
    "kb": "cli.kb:app",
    "memory": "cli.memory:app",
    "users": "cli.users:app",
    "peers": "cli.peers:app",
    "persona": "cli.persona:app",
    "playbook": "cli.playbook:app",
    "model": "cli.model:app",
    "personas": "cli.fleet:app",
    "llm": "cli.llm:app",
    "config": "cli.config:app",
}


class Anima(AnimaGroup):
    """The app's command group: its commands imported when they run."""

    lazy_commands = COMMANDS


# AnimaGroup: a bad configuration (cli/startup.py) is one message and exit code 2 in every command; `--debug` shows
# its traceback
app = typer.Typer(
    cls=Anima, add_completion=False, no_args_is_help=False, help="anima: a persona that thinks, talks and remembers."
)
app.callback(invoke_without_command=True)(with_debug_option(run_playbook))
