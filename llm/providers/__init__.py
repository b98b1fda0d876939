"""Model providers. Each hides its client library; `build_provider` makes one from a registry entry."""

from __future__ import annotations

from typing import Any

from llm.base import Provider


def build_provider(entry: dict[str, Any]) -> Provider:
    kind = entry.get("provider", "llamacpp")
    if kind == "llamacpp":
        from llm.providers.llamacpp import EmbeddedLlamaCpp

        return EmbeddedLlamaCpp.from_entry(entry)
    if kind == "openai":
        from llm.providers.openai_compat import OpenAICompatible

        return OpenAICompatible.from_entry(entry)
    raise ValueError(f"unknown LLM provider {kind!r} (expected 'llamacpp' or 'openai')")
