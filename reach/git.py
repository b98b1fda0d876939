"""Git repositories, through dulwich: a pure-Python, maintained implementation of Git (HMP names it with GitPython
and pygit2). Chosen over GitPython (which runs the `git` binary) and pygit2 (libgit2 bindings): nothing outside the
virtualenv is needed, no subprocess or shell is started with a model's arguments, and every read is bounded here.

- reading any repository: `log` (the newest commits), `show` (one commit: its message and the files it changed),
  `files` (the paths of a tree, or one file's text at a revision), each within an output budget;
- keeping a directory in a repository of its own: `commit_all` (every change staged, one commit; a repository made
  on first use) — the persona's own files (managers/persona.py), committed on each change, their history visible.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dulwich.objects import Commit, TreeEntry
    from dulwich.repo import Repo

MAX_COMMITS = 50
MAX_CHARS = 8000


class GitError(ValueError):
    """Not a repository, an unknown revision or path (the message says which)."""


@dataclass(frozen=True)
class CommitInfo:
    id: str
    author: str
    at: datetime
    message: str

    def line(self) -> str:
        return f"{self.id[:10]} {self.at:%Y-%m-%d %H:%M} {self.author}: {self.message.splitlines()[0] if self.message else ''}"  # noqa: E501


def _repo(path: str | Path) -> Repo:
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        return Repo(str(Path(path).expanduser()))
    except (NotGitRepository, FileNotFoundError, NotADirectoryError):
        raise GitError(f"{path} is not a Git repository") from None


def _info(commit: Commit) -> CommitInfo:
    return CommitInfo(
        id=commit.id.decode("ascii"),
        author=commit.author.decode("utf-8", "replace").split(" <")[0],
        at=datetime.fromtimestamp(commit.commit_time, UTC),
        message=commit.message.decode("utf-8", "replace").strip(),
    )


def _commit(repo: Repo, rev: str | None) -> Commit:
    from dulwich.objects import Commit
    from dulwich.refs import Ref

    try:
        if not rev or rev == "HEAD":
            obj = repo[repo.head()]
        else:
            raw = rev.encode("ascii")
            if len(raw) == 40:
                obj = repo[raw]
            elif len(raw) >= 4 and all(c in b"0123456789abcdef" for c in raw):  # an abbreviated id
                obj = repo[next(s for s in repo.object_store if s.startswith(raw))]
            else:
                obj = repo[repo.refs[Ref(b"refs/heads/" + raw)]]
    except (KeyError, StopIteration, UnicodeEncodeError):
        raise GitError(f"no revision {rev!r}") from None
    if not isinstance(obj, Commit):
        raise GitError(f"{rev!r} is not a commit")
    return obj


def _path(entry: TreeEntry | None) -> str:  # None: the missing side of a change
    return entry.path.decode("utf-8", "replace") if entry is not None and entry.path else ""


def log(path: str | Path, n: int = 10, file: str | None = None) -> list[CommitInfo]:
    """The newest `n` commits (at most MAX_COMMITS) from HEAD, or those that changed `file`."""
    from dulwich.refs import Ref

    repo = _repo(path)
    try:
        if not repo.refs.keys() or Ref(b"HEAD") not in repo.refs:
            return []
        try:
            repo.head()
        except KeyError:
            return []
        walker = repo.get_walker(max_entries=max(1, min(n, MAX_COMMITS)), paths=[file.encode()] if file else None)
        return [_info(entry.commit) for entry in walker]
    finally:
        repo.close()


def show(path: str | Path, rev: str | None = None, max_chars: int = MAX_CHARS) -> str:
    """One commit: its id, author, time and message, and the files it changed (added, modified, deleted)."""
    from dulwich.diff_tree import tree_changes
    from dulwich.objects import Commit

    repo = _repo(path)
    try:
        commit = _commit(repo, rev)
        first_parent = repo[commit.parents[0]] if commit.parents else None
        parent = first_parent.tree if isinstance(first_parent, Commit) else None
        changes = [
            f"{c.type} {_path(c.new) or _path(c.old)}" for c in tree_changes(repo.object_store, parent, commit.tree)
        ]
        info = _info(commit)
        text = f"commit {info.id}\n{info.author} at {info.at:%Y-%m-%d %H:%M:%S} UTC\n\n{info.message}\n\n" + "\n".join(
            changes
        )
        return text[:max_chars]
    finally:
        repo.close()


def files(path: str | Path, rev: str | None = None, file: str | None = None, max_chars: int = MAX_CHARS) -> str:
    """The paths of the tree at `rev` (one a line), or — with `file` — that file's text at `rev` (bounded)."""
    from dulwich.object_store import tree_lookup_path
    from dulwich.objects import Blob

    repo = _repo(path)
    try:
        commit = _commit(repo, rev)
        if file:
            try:
                _, sha = tree_lookup_path(repo.__getitem__, commit.tree, file.encode())
            except KeyError:
                raise GitError(f"no file {file!r} at {rev or 'HEAD'}") from None
            blob = repo[sha]
            if not isinstance(blob, Blob):
                raise GitError(f"{file!r} is a directory at {rev or 'HEAD'}, not a file")
            return blob.data.decode("utf-8", "replace")[:max_chars]
        names = [entry.path.decode("utf-8", "replace") for entry in repo.object_store.iter_tree_contents(commit.tree)]
        return "\n".join(sorted(names))[:max_chars]
    finally:
        repo.close()


def commit_all(path: str | Path, message: str, author: str = "anima <anima@localhost>") -> str | None:
    """Every change under `path` (added, modified, deleted files) in one commit; the repository made on first use.
    The commit id, or None when nothing changed."""
    from dulwich import porcelain

    folder = Path(path).expanduser()
    if not (folder / ".git").exists():
        porcelain.init(str(folder))
    repo = _repo(folder)
    try:
        status = porcelain.status(repo)
        changed = bool(status.untracked or any(status.staged.values()) or status.unstaged)
        if not changed:
            return None
        porcelain.add(repo, paths=None)  # everything under the work tree (deletions too), .gitignore honoured
        sha = porcelain.commit(repo, message=message.encode(), author=author.encode(), committer=author.encode())
        return sha.decode("ascii")
    finally:
        repo.close()


__all__ = ["CommitInfo", "GitError", "commit_all", "files", "log", "show"]
