"""anima's command line (typer). One module per command family; this page wires them:

    run.py [--playbook repl] …      run_playbook.py   the persona's loop, a one-shot playbook; `dream`
    run.py say "…"                  talk.py           a note to the persona
    run.py serve                    web.py            the web app and API alone (the loop serves it too)
    run.py mcp                      mcp.py            the persona as an MCP server over stdio (the web app: /mcp)
    run.py inspect [--json]         inspect.py        what it did and is (graph/reports.py)
    run.py approvals / approve / deny  approvals.py   the human's side of consent
    run.py sessions …               sessions.py       list, export, revive
    run.py users …                  users.py          the persona's people, contact requests
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

from cli import (approvals, config, fleet, inspect, kb, llm, mcp, memory, model, persona, playbook, run_playbook,
                 sessions, spawn, talk, users, web)
from cli.startup import AnimaGroup, with_debug_option

# AnimaGroup: a bad configuration (cli/startup.py) is one message and exit code 2 in every command; `--debug` shows
# its traceback
app = typer.Typer(cls=AnimaGroup, add_completion=False, no_args_is_help=False,
                  help="anima: a persona that thinks, talks and remembers.")
app.callback(invoke_without_command=True)(with_debug_option(run_playbook.run_playbook))
app.command()(run_playbook.dream)
app.command()(talk.say)
app.command()(web.serve)
app.command()(mcp.mcp)
app.command()(spawn.spawn)
app.command()(inspect.inspect)
app.command()(approvals.approvals)
app.command()(approvals.approve)
app.command()(approvals.deny)
app.add_typer(sessions.app, name="sessions")
app.add_typer(kb.app, name="kb")
app.add_typer(memory.app, name="memory")
app.add_typer(users.app, name="users")
app.add_typer(persona.app, name="persona")
app.add_typer(playbook.app, name="playbook")
app.add_typer(model.app, name="model")
app.command()(fleet.worker)
app.add_typer(fleet.app, name="personas")
app.add_typer(llm.app, name="llm")
app.add_typer(config.app, name="config")
