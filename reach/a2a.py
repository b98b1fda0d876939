"""A2A, the client side: write to any A2A agent (another anima persona, a LangGraph or ADK agent, …) with the
`a2a-sdk` client. It knows no persona or database: a URL, a text, who we say we are, a token and a time limit in; the
agent's answer (or that it is still working) out.

The agent is found by its card (`<url>/.well-known/agent-card.json`); the message goes to the endpoint the card names,
JSON-RPC, not streamed, waiting for the task to end (the agent may answer "still working" instead: `A2AReply.done`
is False then, and its later answer comes as a message of its own)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CARD_PATH = "/.well-known/agent-card.json"


class A2AError(RuntimeError):
    """The agent could not be reached or refused the message; the text says which and why."""


@dataclass(frozen=True)
class A2AReply:
    text: str | None  # the agent's answer, when it gave one
    state: str  # "message" (a direct answer), or the task's state: completed, working, rejected, failed, …
    task_id: str | None = None
    agent: dict[str, Any] | None = None  # what its card says it is: name, description, skills (`card_summary`)

    @property
    def done(self) -> bool:
        return self.state in ("message", "completed")


CARD_SKILLS = 12  # skills kept of a card's, each name at most 80 characters
CARD_TEXT = 300


def card_summary(card: Any) -> dict[str, Any]:
    """What an agent's card says it offers, bounded: its name, description and its skills' names."""
    return {
        "agent": str(card.name)[:CARD_TEXT],
        "description": str(card.description)[:CARD_TEXT],
        "skills": [str(skill.name or skill.id)[:80] for skill in list(card.skills)[:CARD_SKILLS]],
    }


def card_base(url: str) -> str:
    """An agent's base URL from its URL or its card's URL."""
    url = url.strip().rstrip("/")
    return url[: -len(CARD_PATH)] if url.endswith(CARD_PATH) else url


async def send_text(
    url: str,
    text: str,
    *,
    metadata: Mapping[str, Any] | None = None,
    token: str | None = None,
    timeout_s: float = 60.0,
    message_id: str | None = None,
) -> A2AReply:
    """Send `text` to the agent at `url` (its base URL or card URL) and wait up to `timeout_s` for its answer."""
    import httpx
    from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, create_client
    from a2a.helpers import get_artifact_text, get_message_text, new_text_message
    from a2a.types import Role, SendMessageRequest, TaskState

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)), headers=headers
    ) as http:
        try:
            card = await A2ACardResolver(http, card_base(url)).get_agent_card()
            client = await create_client(card, client_config=ClientConfig(streaming=False, httpx_client=http))
        except (A2AClientError, httpx.HTTPError, ValueError) as exc:
            raise A2AError(f"no A2A agent card at {card_base(url)}{CARD_PATH}: {exc}") from exc
        agent = card_summary(card)
        message = new_text_message(text, role=Role.ROLE_USER)
        if message_id:
            message.message_id = message_id
        if metadata:
            message.metadata.update(dict(metadata))
        request = SendMessageRequest(message=message)
        try:
            async for event in client.send_message(request):
                if event.HasField("message"):
                    return A2AReply(get_message_text(event.message) or None, "message", agent=agent)
                if event.HasField("task"):
                    task = event.task
                    state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower()
                    answer = "\n".join(t for t in (get_artifact_text(a) for a in task.artifacts) if t)
                    if not answer and task.status.HasField("message"):
                        answer = get_message_text(task.status.message)
                    if state in ("rejected", "failed", "auth_required"):
                        raise A2AError(f"the agent's task {task.id} ended {state}: {answer or 'no reason given'}")
                    return A2AReply(answer or None if state == "completed" else None, state, task.id, agent)
        except (A2AClientError, httpx.HTTPError) as exc:
            raise A2AError(f"{card_base(url)}: {exc}") from exc
        finally:
            await client.close()
    raise A2AError(f"{card_base(url)} answered neither a message nor a task")


__all__ = ["CARD_PATH", "A2AError", "A2AReply", "card_base", "card_summary", "send_text"]
