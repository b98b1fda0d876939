"""Model access: providers, the registry with priorities and failover, token counting. Imports nothing above llm/."""

from llm.base import AllLLMsUnavailable, Generation, LLMCancelled, LLMUnavailable, Provider, Sampling, approx_tokens
from llm.registry import LLMRegistry

__all__ = [
    "AllLLMsUnavailable",
    "Generation",
    "LLMCancelled",
    "LLMRegistry",
    "LLMUnavailable",
    "Provider",
    "Sampling",
    "approx_tokens",
]
