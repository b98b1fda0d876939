"""`run.py peers …`: the personas and A2A agents this one knows (managers/peers.py), and their credentials — the
operator's door, as the Mesh page is:

    run.py peers list                        the peers, their credentials (hints only) and whether I hold theirs
    run.py peers add NAME [--url URL]        a peer (its A2A base URL: its card at <url>/.well-known/agent-card.json)
    run.py peers remove NAME                 forget it: its credentials are revoked, the one it gave me dropped
    run.py peers issue NAME                  a credential for the peer: printed this once, only its hash is kept
    run.py peers revoke NAME [--id N]        revoke one credential, or all of the peer's
    run.py peers use NAME                    keep the credential the peer issued to me (read from stdin, never a flag:
                                             a flag would stay in the shell's history); --forget drops it
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.markup import escape

from cli.options import DataDir, DbUrl, PersonaName, console, err, open_database, owner_unit_of, print_listing

app = typer.Typer(
    help="The peers (other personas and A2A agents) and the credentials between them.", no_args_is_help=True
)
BY = "owner (cli)"


def _run(action: Any, data_dir: str | None, db: str | None, name: str | None) -> Any:
    from managers.errors import NotFound, Refused
    from memory.secrets import SecretStoreError

    database = open_database(data_dir, db, name)
    try:
        with owner_unit_of(database, data_dir, db) as house:
            return action(house)
    except (NotFound, Refused, SecretStoreError) as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(1) from None
    finally:
        database.close()


def _credential(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "hint": row.hint + "…",
        "issued_by": row.issued_by,
        "created_at": str(row.created_at),
        "last_used_at": str(row.last_used_at) if row.last_used_at else None,
        "revoked_at": str(row.revoked_at) if row.revoked_at else None,
    }


@app.command("list")
def list_peers(
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The peers, the credentials issued to each (hints only) and whether I hold one of theirs."""
    rows = _run(
        lambda m: [
            {
                "name": p.name,
                "a2a_url": p.a2a_url,
                "did": p.did,
                "blocked": p.blocked,
                "credentials": [_credential(c) for c in m.peers.credentials(p.id)],
                "holds_theirs": m.peers.has_outgoing_token(p.id),
            }
            for p in m.peers.list()
        ],
        data_dir,
        db,
        name,
    )
    if print_listing(rows, as_json, "no peers yet (run.py peers add NAME --url URL)"):
        return
    for r in rows:
        live = [c for c in r["credentials"] if c["revoked_at"] is None]
        console.print(
            f"[bold]{escape(r['name'])}[/] {escape(r['a2a_url'] or 'no A2A address')}"
            f"{' [red]blocked[/]' if r['blocked'] else ''} · {len(live)} live credential(s) "
            f"({', '.join(c['hint'] for c in live) or 'none'}) · "
            f"{'I hold its credential' if r['holds_theirs'] else 'no credential of its for me'}",
            highlight=False,
        )


@app.command("add")
def add(
    peer: str,
    url: str | None = typer.Option(None, "--url", help="Its A2A base URL."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Add a peer (your own act: no approval is asked)."""
    added = _run(lambda m: m.peers.add(peer, a2a_url=url, added_by="owner").name, data_dir, db, name)
    console.print(f"added {escape(added)}", highlight=False)


@app.command("remove")
def remove(peer: str, data_dir: str | None = DataDir, db: str | None = DbUrl, name: str | None = PersonaName) -> None:
    """Forget a peer: its credentials are revoked and the one it issued to me is dropped."""
    removed = _run(lambda m: m.peers.remove(peer).name, data_dir, db, name)
    console.print(f"removed {escape(removed)}", highlight=False)


@app.command("issue")
def issue(
    peer: str,
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A new credential for the peer to call me with: printed this once (only its hash is kept). Give it to the peer's
    owner, who runs `run.py peers use <my name>` with it."""
    row, token = _run(lambda m: _issued(m, peer), data_dir, db, name)
    if as_json:
        print(json.dumps({"credential": row, "token": token}))
        return
    err.print(
        f"credential {row['id']} for {escape(peer)} — shown this once; it opens my A2A endpoint as "
        f"{escape(peer)} and nothing else (revoke: run.py peers revoke {escape(peer)} --id {row['id']}):",
        highlight=False,
    )
    print(token)


def _issued(m: Any, peer: str) -> tuple[dict[str, Any], str]:
    row, token = m.peers.issue_credential(peer, by=BY)
    return _credential(row), token


@app.command("revoke")
def revoke(
    peer: str,
    credential: int | None = typer.Option(None, "--id", help="One credential (default: all)."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Revoke one of the peer's credentials, or all of them: they open nothing from now on."""
    revoked = _run(lambda m: [c.id for c in m.peers.revoke_credentials(peer, credential)], data_dir, db, name)
    console.print(
        f"revoked {len(revoked)} credential(s) of {escape(peer)}"
        f"{': ' + ', '.join(map(str, revoked)) if revoked else ''}",
        highlight=False,
    )


@app.command("use")
def use(
    peer: str,
    forget: bool = typer.Option(False, "--forget", help="Drop the credential I hold."),
    data_dir: str | None = DataDir,
    db: str | None = DbUrl,
    name: str | None = PersonaName,
) -> None:
    """Keep the credential the peer issued to me (one line on stdin), sent with my messages to it; kept like every
    secret (a 0600 file, or sealed), never in the database."""
    token = None
    if not forget:
        token = sys.stdin.readline().strip()
        if not token:
            err.print("[red]no credential on stdin (e.g. `run.py peers use bob < bob.credential`)[/]")
            raise typer.Exit(1)
    _run(lambda m: m.peers.set_outgoing_token(peer, token), data_dir, db, name)
    console.print(f"{'dropped' if forget else 'kept'} the credential {escape(peer)} issued to me", highlight=False)
