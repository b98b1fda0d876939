"""Hybrid retrieval over every memory tier: index.py (Chroma vectors + the database's full-text index, fused, MMR),
lexical.py (BM25 over the full-text documents), query.py (who and when a query is about), embeddings.py (MiniLM
from its PyPI package, or an OpenAI-compatible /v1/embeddings)."""
