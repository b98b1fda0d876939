"""Hybrid retrieval over every memory tier: index.py (Chroma vectors + BM25, fused, MMR), lexical.py (BM25),
embeddings.py (MiniLM from its PyPI package, or an OpenAI-compatible /v1/embeddings)."""
