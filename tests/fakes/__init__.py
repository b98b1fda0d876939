"""Test fakes: a scripted LLM provider (llm.py: FakeLLM) and a deterministic embedder (memory.py: HashEmbedder), for the
tests and the benchmarks; no product package imports them."""
