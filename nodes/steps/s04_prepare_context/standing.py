"""Small prompt blocks of what stands for a while: the ethics model the persona decides under (HMP context 1:
ethics.yaml's `model_type`, `model_weights`, `audit_json`), Isolated Mode with Emergency Consensus while its mesh
is unreachable (HMP; managers/mesh.py), and the peers it knows (managers/peers.py). Each is empty when there is
nothing to say, so a prompt without them is as before."""

from __future__ import annotations

from functools import partial

import i18n
from managers import Managers
from managers.audience import Audience
from nodes.context import Services
from nodes.reflexes.prompts import (
    EMERGENCY_LINE,
    ETHICS_AUDIT_ALL,
    ETHICS_AUDIT_DIARY,
    ETHICS_AUDIT_OTHER,
    ETHICS_MODEL_LINE,
    ETHICS_WEIGHTS_LINE,
    ISOLATED_LINE,
    ISOLATED_WHY_DOOR,
    ISOLATED_WHY_PEERS,
)
from nodes.steps.prompts import PEER_MET, PEER_NO_TRUST, PEERS_MORE
from persona.ethics import Ethics


def ethics_model_lines(ethics: Ethics, language: str) -> list[str]:
    """The ethics model and the audit it is under, when ethics.yaml states more than the principles."""
    if not ethics.stated:
        return []
    t = partial(i18n.text, language=language)
    lines = [t(ETHICS_MODEL_LINE).format(model=ethics.model_type)]
    if ethics.model_weights:
        lines.append(t(ETHICS_WEIGHTS_LINE).format(weights=ethics.weights_text()))
    audit = ethics.audit_json
    if audit.record == "all":
        lines.append(t(ETHICS_AUDIT_ALL))
    if audit.diary:
        lines.append(t(ETHICS_AUDIT_DIARY))
    other = audit.model_extra or {}
    if other:
        lines.append(t(ETHICS_AUDIT_OTHER).format(settings="; ".join(f"{k}: {v}" for k, v in sorted(other.items()))))
    return [" ".join(lines)]


def mesh_lines(services: Services, house: Managers, language: str) -> list[str]:
    """While the mesh is on and unreachable: since when, what waits, and the Emergency Consensus rule."""
    if not services.settings.mesh.enabled:
        return []
    mesh = house.mesh
    state = mesh.connectivity()  # the tick's config snapshot holds it: no query
    if not state.isolated:
        return []
    t = partial(i18n.text, language=language)
    since = state.isolated_since or state.since
    when = f"{since.astimezone(services.settings.zone()):%Y-%m-%d %H:%M}" if since else "?"
    why = t(ISOLATED_WHY_DOOR if state.door == "not_started" else ISOLATED_WHY_PEERS)
    return [t(ISOLATED_LINE).format(since=when, why=why, queued=house.prompt.mesh_queued()), t(EMERGENCY_LINE)]


def peer_lines(house: Managers, audience: Audience, language: str) -> list[str]:
    """The peers this audience may be shown (managers/peers.py `known`): each by the name it has here, its DID, the
    trust it earned and the owner's tags, and whether nobody added it (met on the mesh or over A2A); the rest
    counted. What a peer says of itself is not here (agents.list shows it, fenced as a command's result)."""
    shown, more = house.peers.for_prompt(audience)
    t = partial(i18n.text, language=language)
    lines = []
    for peer in shown:
        trust = t(PEER_NO_TRUST) if peer.trust is None else f"trust {peer.trust:+.2f}"
        parts = [f"- {peer.name}", peer.did or "", trust, ", ".join(peer.tags), t(PEER_MET) if peer.met else ""]
        lines.append("; ".join(p for p in parts if p))
    if more:
        lines.append(t(PEERS_MORE).format(count=more))
    return lines
