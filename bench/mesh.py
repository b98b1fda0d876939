"""The mesh's figures, as JSON:

- containers signed and verified per second (reach/hmp: Ed25519 + RFC 8785, one core);
- CogSync propagation p50/p95 across 3 and 10 personas — each a real `python -m mesh` process with its own py-libp2p
  sidecar on loopback, all joining through one bootstrap address; a diary entry is published by tag in one persona's
  database and the time until it is a memory in each other persona's database is measured on the receiving
  process's own clock (the container's signed timestamp → the receiver's row; one host, one clock), with the load
  average it ran under and where the time went, from the moments each door keeps (`--state`): `outbox` (sealed →
  the publisher's door hands it to its sidecar: our polling), `wire` (→ the receiver's libp2p node takes it: both
  sidecars and gossipsub), `pipe` (→ the receiver's door reads it: the JSON-line pipe and the reader thread) and
  `apply` (→ the row: verification and the database); `arrived_by_sync` counts what came by have/want instead of
  gossip. `--adaptive-gossip` runs the sidecars with py-libp2p 0.8.1's default adaptive gossip, for comparison;
- memory per peer: resident memory of a mesh door process and of its libp2p sidecar;
- attacks: forged, replayed, expired and oversized containers sent to a persona's manager, and how many were
  accepted (each must be 0);
- partitions: two personas apart for 10 s while each writes 50 messages to the other and 50 to everyone — b's libp2p
  node frozen (SIGSTOP: a partition, a hung link) or b killed (kill -9) and started again —, then healed: what was
  queued, what was delivered after it healed (by gossip, by sync), how long that took, what was lost or applied
  twice, and what it cost either side's trust;
- the README's demo: seconds from the second command's start until each side printed that it met the other and
  received its signed hello, verified;
- leaving Isolated Mode: 100 containers (and 300 with a kill -9 of the sender mid-flush) queued alone, then a peer
  that takes 10 a second: what arrived, what was refused for rate, what it cost the sender's trust.

    python bench/mesh.py [--peers 3,10] [--entries 10] [--only-partition | --no-partition]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from managers import ManagerDeps, Managers  # noqa: E402
from memory import Database  # noqa: E402
from memory.models import MeshContainer  # noqa: E402
from mesh.transport import wait_for  # noqa: E402
from persona.settings import MeshSettings, Settings  # noqa: E402
from reach.hmp.containers import check, encode, seal  # noqa: E402
from reach.hmp.identity import Identity  # noqa: E402

LIBP2P_PYTHON = Path.home() / ".cache/anima/libp2p/bin/python"


def sign_verify(count: int = 2000) -> dict[str, float]:
    me = Identity.generate()
    payload = {"kind": "diary", "text": "the spring tide peaks at 4.6 m at the harbour mouth", "tags": ["tides"]}
    start = time.perf_counter()
    sealed = [encode(seal(me, "cogsync", payload, topic="tides")) for _ in range(count)]
    signed = count / (time.perf_counter() - start)
    start = time.perf_counter()
    for raw in sealed:
        check(raw)
    verified = count / (time.perf_counter() - start)
    return {"signed_per_s": round(signed), "verified_per_s": round(verified), "container_bytes": len(sealed[0])}


def settings_for(path: Path) -> Settings:
    return Settings(data_dir=str(path), mesh=MeshSettings(enabled=True, sync_every_s=2.0))


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def quantiles(values: list[float]) -> dict[str, float | None]:
    values = sorted(values)
    if not values:
        return {"p50_ms": None, "p95_ms": None}
    return {
        "p50_ms": round(1000 * statistics.median(values), 1),
        "p95_ms": round(1000 * values[int(0.95 * (len(values) - 1))], 1),
    }


def stages(published: dict[str, float], sent: dict[str, float], arrivals: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the time went: outbox, wire, pipe, apply (p50/p95 of each, in ms) over the arrivals by gossip."""
    spans: dict[str, list[float]] = {"outbox": [], "wire": [], "pipe": [], "apply": []}
    for cid, moment in published.items():
        if cid in sent:
            spans["outbox"].append(sent[cid] - moment)
    for arrival in arrivals:
        cid = str(arrival["id"])
        if arrival.get("via") != "gossip" or not arrival.get("arrived") or cid not in sent:
            continue
        spans["wire"].append(float(arrival["arrived"]) - sent[cid])
        spans["pipe"].append(float(arrival["taken"]) - float(arrival["arrived"]))
        spans["apply"].append(float(arrival["stored"]) - float(arrival["taken"]))
    return {name: quantiles(values) for name, values in spans.items()}


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def propagation(peers: int, entries: int, root: Path, *, adaptive_gossip: bool = False) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ANIMA_MESH__SIDECAR_PYTHON": str(LIBP2P_PYTHON),
        "ANIMA_MESH__SYNC_EVERY_S": "2",
        "ANIMA_MESH__ADAPTIVE_GOSSIP": "true" if adaptive_gossip else "false",
        "ANIMA_MESH__START_TIMEOUT_S": "600",
    }  # ten doors and ten libp2p nodes start at once on a shared machine
    load_before = load_average()
    processes: list[subprocess.Popen[bytes]] = []
    dirs = [root / f"p{peers}_{i}{'_adaptive' if adaptive_gossip else ''}" for i in range(peers)]
    for path in dirs:
        Database.open(path).close()
    try:
        bootstrap: list[str] = []
        for index, path in enumerate(dirs):
            state = path.with_suffix(".json")
            args = [sys.executable, "-m", "mesh", "--data-dir", str(path), "--state", str(state), "--topic", "bench"]
            for address in bootstrap:
                args += ["--bootstrap", address]
            processes.append(
                subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            if index == 0:
                if not wait_for(state.exists, 60):
                    raise RuntimeError("the bootstrap persona did not start")
                bootstrap = [json.loads(state.read_text())["addrs"][0]]
        states = [p.with_suffix(".json") for p in dirs]
        if not wait_for(lambda: all(s.exists() for s in states), 600, every=0.5):  # a loaded machine starts slowly
            raise RuntimeError(f"{sum(not s.exists() for s in states)} of {peers} doors did not start in 600 s")
        started = load_average()
        # everyone reaches someone, and the publisher knows every other DID (their `have` arrived)
        publisher_state = states[0]
        wait_for(lambda: len(json.loads(publisher_state.read_text()).get("dids", [])) >= peers - 1, 300, every=0.5)
        time.sleep(3)  # gossipsub meshes settle on heartbeats
        db = Database.open(dirs[0])
        ids: list[str] = []
        published: dict[str, float] = {}  # container id -> its signed timestamp (s)
        try:
            for i in range(entries):
                with db.unit() as repos:
                    house = Managers(repos, ManagerDeps(settings=settings_for(dirs[0])))
                    house.diary.add(f"bench entry {i} at {time.time()}", tags=["bench"])
                    for container in house.mesh.publish("bench", limit=1):
                        ids.append(container["id"])
                        published[container["id"]] = container["ts"] / 1000
                time.sleep(0.2)
        finally:
            db.close()
        latencies: list[float] = []
        missing = 0
        for path in dirs[1:]:
            receiver = Database.open(path)
            try:

                def arrived() -> int:
                    with receiver.reading() as repos:  # noqa: B023 - called within this iteration
                        return sum(1 for i in ids if repos.mesh.get(i) is not None)

                wait_for(lambda: arrived() == len(ids), 60, every=0.2)
                with receiver.reading() as repos:
                    for cid in ids:
                        row: MeshContainer | None = repos.mesh.get(cid)
                        if row is None:
                            missing += 1
                            continue
                        created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
                        latencies.append(created.timestamp() - row.body["ts"] / 1000)
            finally:
                receiver.close()
        time.sleep(1.5)  # the doors rewrite their state files
        read = [json.loads(state.read_text()) for state in states]
        stats = [x.get("stats", {}) for x in read[1:]]
        wanted = set(ids)
        arrivals = [
            {"id": cid, **moments}
            for x in read[1:]
            for cid, moments in x.get("timings", {}).get("arrived", {}).items()
            if cid in wanted
        ]
        door_rss = [rss_kib(p.pid) for p in processes]
        sidecar_rss = [sum(rss_kib(c) for c in children(p.pid)) for p in processes]
        return {
            "peers": peers,
            "entries": entries,
            "adaptive_gossip": adaptive_gossip,
            "deliveries": len(latencies),
            "missing": missing,
            **quantiles(latencies),
            "stages": stages(published, read[0].get("timings", {}).get("sent", {}), arrivals),
            "arrived_by_gossip": sum(int(x.get("accepted", 0)) for x in stats),
            "arrived_by_sync": sum(int(x.get("synced_accepted", 0)) for x in stats),
            "door_rss_mib": round(statistics.mean(door_rss) / 1024, 1),
            "sidecar_rss_mib": round(statistics.mean(sidecar_rss) / 1024, 1),
            "load_1min_before": load_before,
            "load_1min_started": started,
            "load_1min_after": load_average(),
            "cpus": os.cpu_count(),
        }
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def attacks(root: Path, each: int = 50) -> dict[str, int]:
    db = Database.open(root / "target")
    honest, mallory = Identity.generate(), Identity.generate()
    counts = {
        "forged_sent": 0,
        "forged_accepted": 0,
        "replayed_sent": 0,
        "replayed_accepted": 0,
        "expired_sent": 0,
        "expired_accepted": 0,
        "oversized_sent": 0,
        "oversized_accepted": 0,
    }
    try:
        with db.unit() as repos:
            house = Managers(repos, ManagerDeps(settings=settings_for(root / "target")))
            originals = [seal(honest, "message", {"text": f"honest {i}"}) for i in range(each)]
            for container in originals:
                assert house.mesh.receive(encode(container)).status == "accepted"
            for i, container in enumerate(originals):
                cases = {
                    "forged": encode({**container, "payload": {"text": f"put in its mouth {i}"}}),
                    "replayed": encode(container),
                    "expired": encode(seal(mallory, "message", {"n": i}, ttl=1, now_ms=1_000_000)),
                    "oversized": encode(seal(mallory, "message", {"pad": "x" * 70_000, "n": i})),
                }
                for kind, raw in cases.items():
                    counts[f"{kind}_sent"] += 1
                    if house.mesh.receive(raw, relay=mallory.did).status == "accepted":
                        counts[f"{kind}_accepted"] += 1
            counts["mallory_trust_x1000"] = round(1000 * house.reputation.trust(mallory.did))
            counts["honest_trust_x1000"] = round(1000 * house.reputation.trust(honest.did))
    finally:
        db.close()
    return counts


# ---- partitions, a peer gone, leaving Isolated Mode ------------------------------------------------------------------


class DoorProcess:
    """One persona's `python -m mesh` over its data dir, with its state file."""

    def __init__(self, path: Path, env: dict[str, str] | None = None) -> None:
        self.path, self.state, self.env = path, path.with_suffix(".json"), dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        Database.open(path).close()

    def start(self, bootstrap: list[str]) -> None:
        self.state.unlink(missing_ok=True)
        args = [sys.executable, "-m", "mesh", "--data-dir", str(self.path), "--state", str(self.state)]
        for address in bootstrap:
            args += ["--bootstrap", address]
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "ANIMA_MESH__SIDECAR_PYTHON": str(LIBP2P_PYTHON),
            "ANIMA_MESH__SYNC_EVERY_S": "1",
            "ANIMA_MESH__START_TIMEOUT_S": "300",
            **self.env,
        }
        self.process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for(self.state.exists, 300, every=0.2):
            raise RuntimeError(f"{self.path.name} did not start")

    def read(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.state.read_text()))
        except (OSError, ValueError):
            return {}

    @property
    def address(self) -> str:
        return str(self.read()["addrs"][0])

    def sidecar(self) -> int:
        assert self.process is not None
        return children(self.process.pid)[0]

    def kill(self) -> None:
        assert self.process is not None
        for pid in (self.sidecar(), self.process.pid):
            os.kill(pid, signal.SIGKILL)
        self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()

    def unit(self) -> Any:
        return Database.open(self.path)


def _compose(door: DoorProcess, texts: list[str], recipient: str | None) -> None:
    db = door.unit()
    try:
        with db.unit() as repos:
            house = Managers(repos, ManagerDeps(settings=settings_for(door.path)))
            for text in texts:
                house.mesh.compose("message", {"text": text}, recipient=recipient)
    finally:
        db.close()


def _heard(door: DoorProcess, prefix: str) -> list[str]:
    db = door.unit()
    try:
        with db.reading() as repos:
            return [n.text for n in repos.notes.list(source="peer", limit=100_000) if n.text.startswith(prefix)]
    finally:
        db.close()


def _did(door: DoorProcess) -> str:
    db = door.unit()
    try:
        with db.unit() as repos:
            return Managers(repos, ManagerDeps(settings=settings_for(door.path))).mesh.my_did()
    finally:
        db.close()


def _trust_and_refusals(door: DoorProcess, did: str) -> dict[str, Any]:
    db = door.unit()
    try:
        with db.unit() as repos:
            house = Managers(repos, ManagerDeps(settings=settings_for(door.path)))
            return {
                "trust": round(house.reputation.trust(did), 4),
                "evaluations": len([e for e in repos.trust.all() if e.subject == did]),
                "refused": house.mesh.refused_counts(did),
            }
    finally:
        db.close()


def partition(root: Path, mode: str, *, each: int = 50, apart_s: float = 10.0) -> dict[str, Any]:
    """Two personas, a and b, joined; then apart for `apart_s` while each writes `each` messages to the other and
    `each` to everyone: `frozen` — b's libp2p node stops answering (SIGSTOP: a partition, a hung link; both doors go
    on), `gone` — b's door and its node are killed (kill -9) and started again after. Then it heals: how many of
    what each queued arrived at the other, by gossip or by sync, how long that took after the heal, and what was
    lost or applied twice."""
    a, b = DoorProcess(root / f"part_{mode}_a"), DoorProcess(root / f"part_{mode}_b")
    load_before = load_average()
    try:
        a.start([])
        b.start([a.address])
        a_did, b_did = _did(a), _did(b)
        if not wait_for(lambda: b_did in a.read().get("dids", []) and a_did in b.read().get("dids", []), 120, 0.2):
            raise RuntimeError("a and b did not meet")
        if mode == "frozen":
            frozen = b.sidecar()
            os.kill(frozen, signal.SIGSTOP)
        else:
            b.kill()
        apart = time.monotonic()
        _compose(a, [f"a→b {i}" for i in range(each)], b_did)
        _compose(a, [f"a→all {i}" for i in range(each)], None)
        _compose(b, [f"b→a {i}" for i in range(each)], a_did)
        _compose(b, [f"b→all {i}" for i in range(each)], None)
        time.sleep(max(0.0, apart_s - (time.monotonic() - apart)))
        healed = time.monotonic()
        if mode == "frozen":
            os.kill(frozen, signal.SIGCONT)
        else:
            b.start([a.address])
        expected = 2 * each

        def complete() -> bool:
            return len(_heard(b, "a→")) >= expected and len(_heard(a, "b→")) >= expected

        done = wait_for(complete, 300, every=0.5)
        seconds = round(time.monotonic() - healed, 2)
        time.sleep(1.5)
        at_b, at_a = _heard(b, "a→"), _heard(a, "b→")
        stats_a, stats_b = a.read().get("stats", {}), b.read().get("stats", {})
        return {
            "mode": mode,
            "apart_s": apart_s,
            "queued_by_a": expected,
            "queued_by_b": expected,
            "delivered_to_b": len(set(at_b)),
            "delivered_to_a": len(set(at_a)),
            "lost": 2 * expected - len(set(at_b)) - len(set(at_a)),
            "applied_twice": len(at_b) + len(at_a) - len(set(at_b)) - len(set(at_a)),
            "all_delivered": done,
            "seconds_after_heal": seconds,
            "by_gossip": {"a": int(stats_a.get("accepted", 0)), "b": int(stats_b.get("accepted", 0))},
            "by_sync": {"a": int(stats_a.get("synced_accepted", 0)), "b": int(stats_b.get("synced_accepted", 0))},
            "b_trusts_a": _trust_and_refusals(b, a_did),
            "a_trusts_b": _trust_and_refusals(a, b_did),
            "load_1min_before": load_before,
            "load_1min_after": load_average(),
        }
    finally:
        for door in (a, b):
            if door.process is not None and door.process.poll() is None and mode == "frozen":
                for pid in children(door.process.pid):
                    os.kill(pid, signal.SIGCONT)
            door.stop()


def isolated_flush(
    root: Path, queued: int, *, kill: bool = False, rate: float = 10.0, burst: int = 20
) -> dict[str, Any]:
    """A persona queues `queued` containers alone (Isolated Mode), then meets a peer that takes `rate` a second
    (burst `burst`) from one peer; with `kill`, the sender is killed (kill -9) mid-flush and started again. What
    arrived, what was refused for rate, and what it cost the sender's trust there (issue: 54 of 100 and 254 of 300
    lost, the sender distrusted for ~87 days, before the flush was paced and a rate refusal stopped being a fault)."""
    name = f"flush_{queued}{'_kill' if kill else ''}"
    sender = DoorProcess(root / f"{name}_s")
    receiver = DoorProcess(
        root / f"{name}_r", env={"ANIMA_MESH__RATE_PER_S": str(rate), "ANIMA_MESH__BURST": str(burst)}
    )
    sender_did, receiver_did = _did(sender), _did(receiver)
    _compose(sender, [f"queued {i}" for i in range(queued)], receiver_did)
    try:
        sender.start([])
        started = time.monotonic()
        receiver.start([sender.address])
        if kill:
            wait_for(lambda: len(_heard(receiver, "queued ")) >= queued // 5, 300, every=0.2)
            sender.kill()
            sender.start([receiver.address])
        done = wait_for(lambda: len(_heard(receiver, "queued ")) >= queued, 600, every=0.5)
        heard = _heard(receiver, "queued ")
        stats = receiver.read().get("stats", {})
        return {
            "queued": queued,
            "killed_mid_flush": kill,
            "receiver_rate_per_s": rate,
            "receiver_burst": burst,
            "arrived": len(set(heard)),
            "applied_twice": len(heard) - len(set(heard)),
            "all_arrived": done,
            "seconds": round(time.monotonic() - started, 2),
            "by_gossip": int(stats.get("accepted", 0)),
            "by_sync": int(stats.get("synced_accepted", 0)),
            "sender_paced_rounds": int(sender.read().get("stats", {}).get("paced", 0)),
            **_trust_and_refusals(receiver, sender_did),
        }
    finally:
        sender.stop()
        receiver.stop()


def demo(root: Path) -> dict[str, Any]:
    """The README's two commands: seconds from the second one's start until each side printed that it met the other
    and received its signed hello, verified."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANIMA_MESH__SIDECAR_PYTHON": str(LIBP2P_PYTHON)}
    lines: dict[str, list[tuple[float, str]]] = {"a": [], "b": []}
    processes: list[subprocess.Popen[str]] = []

    def run(name: str, *args: str) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "mesh", "--data-dir", str(root / "demo" / name), *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        processes.append(process)

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines[name].append((time.monotonic(), line.rstrip("\n")))

        threading.Thread(target=read, daemon=True).start()

    def first(name: str, *words: str) -> float | None:
        return next((at for at, line in list(lines[name]) if all(w in line for w in words)), None)

    try:
        run("a")
        if not wait_for(lambda: first("a", '"addrs"') is not None, 300):
            raise RuntimeError("a did not start")
        address = json.loads(next(line for _, line in lines["a"] if '"addrs"' in line))["addrs"][0]
        started = time.monotonic()
        run("b", "--topic", "tides", "--bootstrap", address)
        wait_for(lambda: all(first(n, "received a signed hello", "signature verified") for n in "ab"), 300)
        listening = first("b", '"addrs"')
        return {
            name: {
                what: None if (at := first(name, *words)) is None else round(at - started, 2)
                for what, words in (
                    ("met", ("met did:key",)),
                    ("received_hello", ("received a signed hello", "signature verified")),
                )
            }
            for name in "ab"
        } | {"b_listening_s": None if listening is None else round(listening - started, 2)}
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peers", default="3,10")
    parser.add_argument("--entries", type=int, default=10)
    parser.add_argument(
        "--adaptive-gossip",
        action="store_true",
        help="also run each size with py-libp2p's adaptive gossip on (its 0.8.1 default), to compare",
    )
    parser.add_argument("--only-cogsync", action="store_true", help="skip the signing and attack figures")
    parser.add_argument(
        "--only-partition", action="store_true", help="only the partition, peer-gone and Isolated Mode flush runs"
    )
    parser.add_argument("--no-partition", action="store_true", help="skip them")
    options = parser.parse_args()
    out: dict[str, Any] = {} if options.only_cogsync or options.only_partition else {"sign_verify": sign_verify()}
    with tempfile.TemporaryDirectory(prefix="anima-mesh-bench-") as tmp:
        if not options.only_cogsync and not options.only_partition:
            out["attacks"] = attacks(Path(tmp))
        if not LIBP2P_PYTHON.exists():
            subprocess.run(["make", "-C", str(ROOT), "mesh", "PYTHON=python3"], check=True, timeout=900)
        if not options.only_partition:
            out["cogsync"] = []
            for n in options.peers.split(","):
                out["cogsync"].append(propagation(int(n), options.entries, Path(tmp)))
                if options.adaptive_gossip:
                    out["cogsync"].append(propagation(int(n), options.entries, Path(tmp), adaptive_gossip=True))
        if not options.no_partition and not options.only_cogsync:
            out["demo_seconds"] = demo(Path(tmp))
            out["partition"] = [partition(Path(tmp), mode) for mode in ("frozen", "gone")]
            out["isolated_flush"] = [isolated_flush(Path(tmp), 100), isolated_flush(Path(tmp), 300, kill=True)]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
