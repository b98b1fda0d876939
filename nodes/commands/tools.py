"""External tools (HMP "Внешние инструменты и интеграции"): a web page read in a real browser, a watched folder of
notes synced into the knowledge base, Git repositories read — each reaches outside the process, so each is
`external` and waits for the owner's approval (or a standing one: consent.auto_approve). What they bring is data:
it goes to the process log with its source (a page's address, a repository's path) and reaches the next prompt
fenced as data, untrusted (memory/provenance.py). The persona's own file history (`persona.history`) is its own:
read at once."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from managers.vault import VaultError
from memory import provenance
from nodes.commands.args import Args, names
from nodes.commands.model import Command
from nodes.commands.spec import CommandContext, CommandError, CommandResult, Family, arg
from reach.browser import BrowserError, read_page
from reach.git import GitError
from reach.git import files as git_files
from reach.git import log as git_log
from reach.git import show as git_show

FAMILY = Family(
    "tools",
    "external tools: a web page in a browser, a folder of notes, Git repositories",
    compact=True,
    abouts={
        "web": "a web page read in a real browser",
        "git": "Git repositories, read",
        "vault": "the folder of notes my operator named, into my knowledge base",
    },
)

Url = Annotated[str, StringConstraints(strip_whitespace=True, min_length=8, max_length=2000)]
Where = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=1000)]
Rev = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100, pattern=r"^[\w./-]+$")]


class ReadPageArgs(Args):
    url: Url = Field(validation_alias=names("url", "page", "address", "link"))


class RepoArgs(Args):
    repo: Where = Field(validation_alias=names("repo", "repository", "path"))
    rev: Rev | None = Field(None, validation_alias=names("rev", "commit", "revision", "ref"))
    file: Where | None = Field(None, validation_alias=names("file", "filename"))
    n: int = Field(10, ge=1, le=50, validation_alias=names("n", "limit", "count"))


class VaultArgs(Args):
    pass


class HistoryArgs(Args):
    file: Where | None = Field(None, validation_alias=names("file", "filename"))
    n: int = Field(20, ge=1, le=50, validation_alias=names("n", "limit", "count"))


def _logged(ctx: CommandContext, name: str, text: str, origin: str, ref: str, *, ok: bool = True) -> CommandResult:
    """The answer in the process log (so in the next prompt), fenced as data naming where it came from."""
    sources = [provenance.source(origin, ref, text)] if ok else []
    ctx.managers.world.log(
        name,
        text,
        ok=ok,
        thread_id=ctx.thread_id,
        tags=[name.split(".")[0]],
        llm_id=ctx.llm_id,
        task_id=ctx.task_id,
        sources=sources,
    )
    return CommandResult(text, status="executed" if ok else "failed", sources=sources)


@FAMILY.command(
    "web.read",
    '{"url": "https://…"}  (reads a page in a real browser, its scripts run; leaves the process: needs approval)',
    args=ReadPageArgs,
    effect="external",
)
def read_web_page(cmd: Command, ctx: CommandContext) -> CommandResult:
    tools = ctx.settings.tools
    url = str(arg(cmd, "url"))
    try:
        page = read_page(url, executable=tools.browser, timeout_s=tools.page_timeout_s, max_chars=tools.page_chars)
    except BrowserError as exc:
        return _logged(ctx, "web.read", str(exc), "web", url, ok=False)
    text = f"{page.title} — {page.url}\n{page.text}" + ("\n[… the rest of the page left out]" if page.truncated else "")
    return _logged(ctx, "web.read", text, "web", page.url)


def _git(ctx: CommandContext, name: str, cmd: Command, read: str) -> CommandResult:
    repo = str(arg(cmd, "repo"))
    chars = ctx.settings.tools.git_chars
    try:
        if read == "log":
            text = (
                "\n".join(
                    c.line() for c in git_log(repo, arg(cmd, "n", default=10, kind=int), arg(cmd, "file", default=None))
                )
                or "no commits"
            )
        elif read == "show":
            text = git_show(repo, arg(cmd, "rev", default=None), chars)
        else:
            text = git_files(repo, arg(cmd, "rev", default=None), arg(cmd, "file", default=None), chars)
    except GitError as exc:
        raise CommandError(f"{name}: {exc}") from None
    return _logged(ctx, name, text[:chars], "git", f"{name} {repo}")


@FAMILY.command(
    "git.log",
    '{"repo": "/path/to/repo", "n": 10, "file": "optional/path"}  (a repository\'s newest '
    "commits; reads outside my data: needs approval)",
    args=RepoArgs,
    effect="external",
)
def log_command(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _git(ctx, "git.log", cmd, "log")


@FAMILY.command(
    "git.show",
    '{"repo": "/path/to/repo", "rev": "HEAD"}  (one commit: message and files changed; needs approval)',
    args=RepoArgs,
    effect="external",
)
def show_command(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _git(ctx, "git.show", cmd, "show")


@FAMILY.command(
    "git.files",
    '{"repo": "/path/to/repo", "rev": "HEAD", "file": "optional/path"}  (the files at a '
    "revision, or one file's text; needs approval)",
    args=RepoArgs,
    effect="external",
)
def files_command(cmd: Command, ctx: CommandContext) -> CommandResult:
    return _git(ctx, "git.files", cmd, "files")


@FAMILY.command(
    "vault.sync",
    "{}  (the folder of notes my operator named, into my knowledge base now; needs approval)",
    args=VaultArgs,
    effect="external",
)
def sync_vault(cmd: Command, ctx: CommandContext) -> CommandResult:
    try:
        report = ctx.managers.vault.sync()
    except VaultError as exc:
        raise CommandError(f"vault.sync: {exc}") from None
    return CommandResult(report.line(), show=True)


@FAMILY.command(
    "persona.history",
    '{"n": 20, "file": "optional: SOUL.md"}  (the history of my own files)',
    args=HistoryArgs,
    effect="read",
)
def persona_history(cmd: Command, ctx: CommandContext) -> CommandResult:
    lines = ctx.managers.persona.history(arg(cmd, "n", default=20, kind=int), arg(cmd, "file", default=None))
    return CommandResult("\n".join(lines) or "no history of my files is kept yet", show=True)
