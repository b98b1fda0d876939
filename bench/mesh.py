"""The mesh's figures (issue 30), as JSON:

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
  accepted (each must be 0).

    python bench/mesh.py [--peers 3,10] [--entries 10]
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
import time
from datetime import timezone
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
    return {"signed_per_s": round(signed), "verified_per_s": round(verified),
            "container_bytes": len(sealed[0])}


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
    return {"p50_ms": round(1000 * statistics.median(values), 1),
            "p95_ms": round(1000 * values[int(0.95 * (len(values) - 1))], 1)}


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
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANIMA_MESH__SIDECAR_PYTHON": str(LIBP2P_PYTHON),
           "ANIMA_MESH__SYNC_EVERY_S": "2", "ANIMA_MESH__ADAPTIVE_GOSSIP": "true" if adaptive_gossip else "false",
           "ANIMA_MESH__START_TIMEOUT_S": "600"}  # ten doors and ten libp2p nodes start at once on a shared machine
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
            processes.append(subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
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
                    with receiver.reading() as repos:
                        return sum(1 for i in ids if repos.mesh.get(i) is not None)
                wait_for(lambda: arrived() == len(ids), 60, every=0.2)
                with receiver.reading() as repos:
                    for cid in ids:
                        row: MeshContainer | None = repos.mesh.get(cid)
                        if row is None:
                            missing += 1
                            continue
                        created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=timezone.utc)
                        latencies.append(created.timestamp() - row.body["ts"] / 1000)
            finally:
                receiver.close()
        time.sleep(1.5)  # the doors rewrite their state files
        read = [json.loads(state.read_text()) for state in states]
        stats = [x.get("stats", {}) for x in read[1:]]
        wanted = set(ids)
        arrivals = [{"id": cid, **moments} for x in read[1:]
                    for cid, moments in x.get("timings", {}).get("arrived", {}).items() if cid in wanted]
        door_rss = [rss_kib(p.pid) for p in processes]
        sidecar_rss = [sum(rss_kib(c) for c in children(p.pid)) for p in processes]
        return {
            "peers": peers, "entries": entries, "adaptive_gossip": adaptive_gossip, "deliveries": len(latencies),
            "missing": missing, **quantiles(latencies),
            "stages": stages(published, read[0].get("timings", {}).get("sent", {}), arrivals),
            "arrived_by_gossip": sum(int(x.get("accepted", 0)) for x in stats),
            "arrived_by_sync": sum(int(x.get("synced_accepted", 0)) for x in stats),
            "door_rss_mib": round(statistics.mean(door_rss) / 1024, 1),
            "sidecar_rss_mib": round(statistics.mean(sidecar_rss) / 1024, 1),
            "load_1min_before": load_before, "load_1min_started": started, "load_1min_after": load_average(),
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
    counts = {"forged_sent": 0, "forged_accepted": 0, "replayed_sent": 0, "replayed_accepted": 0,
              "expired_sent": 0, "expired_accepted": 0, "oversized_sent": 0, "oversized_accepted": 0}
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peers", default="3,10")
    parser.add_argument("--entries", type=int, default=10)
    parser.add_argument("--adaptive-gossip", action="store_true",
                        help="also run each size with py-libp2p's adaptive gossip on (its 0.8.1 default), to compare")
    parser.add_argument("--only-cogsync", action="store_true", help="skip the signing and attack figures")
    options = parser.parse_args()
    out: dict[str, Any] = {} if options.only_cogsync else {"sign_verify": sign_verify()}
    with tempfile.TemporaryDirectory(prefix="anima-mesh-bench-") as tmp:
        if not options.only_cogsync:
            out["attacks"] = attacks(Path(tmp))
        if not LIBP2P_PYTHON.exists():
            subprocess.run(["make", "-C", str(ROOT), "mesh", "PYTHON=python3"], check=True, timeout=900)
        out["cogsync"] = []
        for n in options.peers.split(","):
            out["cogsync"].append(propagation(int(n), options.entries, Path(tmp)))
            if options.adaptive_gossip:
                out["cogsync"].append(propagation(int(n), options.entries, Path(tmp), adaptive_gossip=True))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
