"""Channels benchmark (JSON): a message in over Matrix → a note → a tick with the instant fake LLM → the reply out
in the room, against a real Synapse (tests/integration/synapse_server.py: its own venv, loopback, SQLite).

Printed: `latency_ms` p50/p95 (the human's send → the reply seen in the room), its parts (`in_ms`: send → note
recorded; `tick_ms`; `out_ms`: tick done → reply seen), `messages_per_s` (sequential round trips) and the
runner's outbox figures. One warm-up tick runs first. `out_ms` includes the runner's outbox poll (0.25 s at most)
and the human client's own 20 ms poll of the room.

    python bench/channels.py [--messages 20]

With `--kills N` it measures instead what a kill -9 while sending costs: N answers queued, a runner SIGKILLed at
the worst point of each — right after the platform accepted it, before the outbox recorded it
(tests/integration/channel_killer.py patches that point) — each restart first finishing the one its predecessor
was killed on. Printed per channel: how many answers arrived once and twice, and how many outbox rows say
`possible duplicate` (the duplicate is visible there, under its one idempotency key). E-mail runs twice: with the
channel's own copy in Sent (appended after recording: a kill after the 250 resends) and with a submission server
that files the copy before its 250 (`append_sent: false`: the restart finds it); and once killed after recording,
before the copy (nothing resent). Needs Dovecot (`make system`); Telegram runs against the tests' Bot API stand-in.

    python bench/channels.py --kills 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from datetime import UTC

from channels.runner import ChannelRunner  # noqa: E402
from graph.agent import build_agent  # noqa: E402
from graph.services import open_services  # noqa: E402
from managers import ManagerDeps, Managers  # noqa: E402
from tests.fakes.llm import FakeLLM  # noqa: E402
from tests.fakes.memory import HashEmbedder  # noqa: E402
from tests.integration.matrix_human import MatrixHuman  # noqa: E402
from tests.integration.matrix_sender import matrix_settings  # noqa: E402
from tests.integration.synapse_server import synapse_server  # noqa: E402

PASSWORD = "anima-bench"


def reply_to(prompt: str) -> str:
    """The instant model: a thought that answers the latest question it was shown with messages.send."""
    asked = prompt.rsplit("question #", 1)[-1].split()[0] if "question #" in prompt else "?"
    return (
        f"Someone asked me something; I answer at once.\n# Commands:\n"
        f'[{{"cmd_id": "r1", "type": "messages.send", "args": {{"text": "answer #{asked}"}}}}]\n# End commands'
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 1)


def wait(check, timeout_s: float = 60, poll_s: float = 0.02):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(poll_s)
    raise TimeoutError(f"{check} within {timeout_s}s")


def killed_while_sending(kind: str, entry, point: str, kills: int, texts_sent) -> dict:
    """`kills` answers to the owner over `entry`; a runner SIGKILLed at `point` of each (its restart first finishes
    the previous one); then a runner finishes the outbox. What arrived how often, and what the rows say."""
    import signal
    import subprocess
    from collections import Counter
    from datetime import datetime

    from memory import Database
    from persona.settings import ChannelsSettings, Settings

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        db = Database.open(data)
        with db.unit() as repos:
            m = Managers(repos, ManagerDeps(settings=Settings(data_dir=str(data))))
            owner = m.people.owner()
            m.people.add_identity(owner.id, kind, entry.options.get("owner_address") or OWNER[kind])
            owner = m.people.update(owner.id, preferred_channel=kind)
            texts = [f"{point} {n} {os.urandom(4).hex()}" for n in range(kills)]
            keys = [m.channels.send(owner, t, now=datetime.now(UTC)).idempotency_key for t in texts]
        db.close()
        for _n in range(kills):
            child = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "tests.integration.channel_killer",
                    str(data),
                    point,
                    json.dumps(entry.model_dump()),
                ],
                cwd=root,
                capture_output=True,
                text=True,
                timeout=180,
                env={**os.environ, "PYTHONPATH": str(root)},
            )
            if child.returncode != -signal.SIGKILL:
                raise RuntimeError(f"the runner was not killed at {point}: {child.stderr[-2000:]}")
        db = Database.open(data)
        settings = Settings(
            user_name="Ann",
            timezone="UTC",
            channels=ChannelsSettings(entries=[entry], poll_wait_s=1, backoff_initial_s=0.1),
        )
        runner = ChannelRunner(db, settings).start()
        try:

            def sent():
                with db.unit() as repos:
                    return all(repos.channels.by_key(k).state == "sent" for k in keys)

            wait(sent, timeout_s=120, poll_s=0.1)
        finally:
            runner.stop()
        with db.unit() as repos:
            rows = [repos.channels.by_key(k) for k in keys]
            flagged = sum((r.last_error or "").startswith("possible duplicate") for r in rows)
        db.close()
    arrived = Counter(texts_sent().get(t, 0) for t in texts)
    return {
        "answers": kills,
        "kills": kills,
        "arrived_once": arrived.get(1, 0),
        "arrived_twice": arrived.get(2, 0),
        "lost": arrived.get(0, 0),
        "rows_marked_possible_duplicate": flagged,
    }


OWNER = {"email": "ann@example.org", "telegram": "777"}


def kills_bench(kills: int) -> dict:
    from email import policy
    from email.parser import BytesParser

    from imapclient import IMAPClient

    from persona.settings import ChannelEntry
    from tests.integration import mail_servers, telegram_bot_api
    from tests.integration.test_telegram_channel import TOKEN, control

    results: dict[str, dict] = {}
    os.environ["BENCH_KILL_EMAIL_PASSWORD"] = mail_servers.USERS["anima@example.org"]
    os.environ["BENCH_KILL_TELEGRAM_TOKEN"] = TOKEN
    with mail_servers.running() as servers, telegram_bot_api.serving(TOKEN) as bot_api:

        def ann_got():
            client = IMAPClient("127.0.0.1", port=servers.imap_port, ssl=False, timeout=20)
            try:
                client.login("ann@example.org", mail_servers.USERS["ann@example.org"])
                client.select_folder("INBOX", readonly=True)
                found = client.fetch(client.search(["ALL"]), [b"BODY.PEEK[]"])
                mails = [BytesParser(policy=policy.default).parsebytes(v[b"BODY[]"]) for v in found.values()]
            finally:
                client.logout()
            from collections import Counter

            return Counter(m.get_content().strip() for m in mails)

        def telegram_got():
            from collections import Counter

            return Counter(s["text"] for s in control(bot_api, "sent") if s["method"] == "sendMessage")

        def email(**extra):
            return ChannelEntry(
                kind="email",
                name="email",
                secret_env={"password": "BENCH_KILL_EMAIL_PASSWORD"},
                options={
                    "address": "anima@example.org",
                    "imap_host": "127.0.0.1",
                    "imap_port": str(servers.imap_port),
                    "imap_tls": "none",
                    "smtp_port": str(servers.smtp_port),
                    "smtp_tls": "none",
                    "poll_s": "0.2",
                    "trusted_authserv_id": mail_servers.AUTHSERV_ID,
                    **extra,
                },
            )

        results["email: copy in Sent by the channel, killed after the 250"] = killed_while_sending(
            "email", email(), "after_250", kills, ann_got
        )
        results["email: copy in Sent by the channel, killed after recording, before the copy"] = killed_while_sending(
            "email", email(), "before_copy", kills, ann_got
        )
        with servers.receiving_as(file_sent=True):
            results["email: the server files Sent before its 250, killed after the 250"] = killed_while_sending(
                "email", email(append_sent="false"), "after_250", kills, ann_got
            )
        telegram = ChannelEntry(
            kind="telegram",
            name="telegram",
            options={"api_url": bot_api, "timeout_s": "10"},
            secret_env={"token": "BENCH_KILL_TELEGRAM_TOKEN"},
        )
        results["telegram: killed after sendMessage answered"] = killed_while_sending(
            "telegram", telegram, "after_telegram_send", kills, telegram_got
        )
    return {
        "bench": "channels-kill",
        "point": "the worst: after the platform accepted, before the outbox recorded (unless named)",
        "results": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--kills", type=int, default=0, help="measure kill -9 while sending instead (N answers)")
    args = parser.parse_args()
    if args.kills:
        print(json.dumps(kills_bench(args.kills), indent=2))
        return
    with tempfile.TemporaryDirectory() as tmp, synapse_server(Path(tmp) / "synapse") as server:
        anima, ada_id = server.register("anima", PASSWORD), server.register("ada", "ada-pw")
        os.environ["MATRIX_TEST_PASSWORD"] = PASSWORD
        fake = FakeLLM("fake", responses=reply_to)
        services = open_services(
            data_dir=str(Path(tmp) / "data"),
            embedded=False,
            providers={"fake": fake},
            entries=[{"id": "fake", "provider": "fake", "priority": 1}],
            embedder=HashEmbedder(),
        )
        agent = build_agent("repl", services=services, data_dir=str(Path(tmp) / "data"), checkpointer="memory")
        db = services.db
        with db.unit() as repos:
            people = services.managers.over(repos).people
            people.add_identity(people.owner().id, "matrix", ada_id)
        runner = ChannelRunner(db, matrix_settings(server.url, anima, poll_wait_s=5)).start()
        loop = asyncio.new_event_loop()
        try:
            ada = loop.run_until_complete(MatrixHuman(server.url, ada_id, "ada-pw").__aenter__())
            room = loop.run_until_complete(ada.room_with(anima))
            loop.run_until_complete(ada.wait_member(room, anima))
            agent.tick()  # warm-up: the graph's first run, caches (not measured)
            total, ins, ticks, outs = [], [], [], []
            started_all = time.perf_counter()
            for i in range(args.messages):
                with db.unit() as repos:
                    seen = repos.notes.newest_id()
                sent = time.perf_counter()
                loop.run_until_complete(ada.say(room, f"question #{i} — what do you think?"))

                def arrived(after: int = seen):
                    with db.unit() as repos:
                        return [n for n in repos.notes.list(after_id=after) if n.source == "channel"]

                wait(arrived)
                noted = time.perf_counter()
                agent.tick()
                ticked = time.perf_counter()
                loop.run_until_complete(ada.wait_message(room, anima, f"answer #{i}", timeout_s=60, poll_s=0.02))
                seen_at = time.perf_counter()
                total.append((seen_at - sent) * 1000)
                ins.append((noted - sent) * 1000)
                ticks.append((ticked - noted) * 1000)
                outs.append((seen_at - ticked) * 1000)
            elapsed = time.perf_counter() - started_all
            with db.unit() as repos:
                rows = services.managers.over(repos).channels.outbox(limit=10_000)
            loop.run_until_complete(ada.__aexit__(None, None, None))
        finally:
            runner.stop()
            loop.close()
            db.close()
    print(
        json.dumps(
            {
                "bench": "channels",
                "transport": "matrix (Synapse on loopback, matrix-nio)",
                "llm": "instant fake",
                "messages": args.messages,
                "latency_ms": {"p50": percentile(total, 0.5), "p95": percentile(total, 0.95)},
                "in_ms": {"p50": percentile(ins, 0.5), "p95": percentile(ins, 0.95)},
                "tick_ms": {"p50": percentile(ticks, 0.5), "p95": percentile(ticks, 0.95)},
                "out_ms": {"p50": percentile(outs, 0.5), "p95": percentile(outs, 0.95)},
                "messages_per_s": round(args.messages / elapsed, 2),
                "outbox": {
                    "sent": sum(r.state == "sent" for r in rows),
                    "failed": sum(r.state == "failed" for r in rows),
                    "attempts_max": max((r.attempts for r in rows), default=0),
                },
                "mean_latency_ms": round(statistics.mean(total), 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
