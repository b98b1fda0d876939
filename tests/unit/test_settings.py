"""One settings object: its layers in order, errors that name the layer that set a bad value, run fields only from
the operator, and a data dir that remembers its persona."""

from __future__ import annotations

import pytest

from persona import default_persona_dir
from persona.settings import SettingsError, load_settings


def add_config(persona, text: str) -> int:
    """Append to config.yaml; the line number of the first appended line."""
    config = persona / "config.yaml"
    before = config.read_text()
    config.write_text(before + text)
    return len(before.splitlines()) + 1


def test_the_layers_apply_in_order(persona, monkeypatch):
    add_config(persona, "user_name: Ada\n")
    assert load_settings(persona).memory.recall_k == 5 and load_settings(persona).user_name == "Ada"  # config.yaml
    mine = {"memory.recall_k": 8, "memory_manager.mode": "meditation"}
    assert load_settings(persona, self_changes=mine).memory.recall_k == 8  # the persona's own change
    monkeypatch.setenv("ANIMA_MEMORY__RECALL_K", "9")
    changed = load_settings(persona, self_changes=mine)
    assert changed.memory.recall_k == 9 and changed.memory_manager.mode == "meditation"  # the environment wins
    assert load_settings(persona, self_changes=mine, memory={"recall_k": 11}).memory.recall_k == 11  # then flags
    assert changed.memory.retrieval.mmr_lambda == 1.0 and changed.drives.inject_at == 0.4  # sections keep defaults


def test_a_bad_value_names_the_layer_that_set_it(persona, monkeypatch):
    line = add_config(persona, "memory:\n  recall_k: -5\n")
    with pytest.raises(SettingsError, match=rf"^config.yaml:{line + 1} memory.recall_k: Input should be greater"):
        load_settings(persona)
    (persona / "config.yaml").write_text((default_persona_dir() / "config.yaml").read_text())
    monkeypatch.setenv("ANIMA_CYCLE__RESPONSES", "500")
    with pytest.raises(SettingsError, match=r"^ANIMA_CYCLE__RESPONSES: Input should be less than or equal to 50"):
        load_settings(persona)
    monkeypatch.delenv("ANIMA_CYCLE__RESPONSES")
    with pytest.raises(SettingsError, match=r"^--window-ratio \(window_ratio\): Input should be greater than 0"):
        load_settings(persona, window_ratio=0)
    with pytest.raises(SettingsError, match=r"memory_manager.novelty_threshold \(config.update\): Input should be"):
        load_settings(persona, self_changes={"memory_manager.novelty_threshold": float("nan")})


def test_where_the_data_lives_is_never_a_persona_file(persona):
    line = add_config(persona, "db_url: postgresql://somewhere/else\n")
    with pytest.raises(
        SettingsError,
        match=rf"^config.yaml:{line} db_url: db_url is the operator's, set on the command "
        r"line or in ANIMA_DB_URL",
    ):
        load_settings(persona)


def test_the_persona_may_change_only_its_own_keys(persona):
    changed = load_settings(
        persona,
        self_changes={
            "memory.recall_k": 7,
            "memory_manager.every": 0,
            "consent.auto_approve": ["identity.update"],
            "llm_url": "http://x",
        },
    )
    assert changed.memory.recall_k == 7
    assert changed.memory_manager.every == 10 and changed.consent.auto_approve == [] and changed.llm_url is None


def test_a_data_dir_remembers_its_persona(persona, tmp_path):
    from cli.options import open_data
    from graph.services import open_services
    from tests.fakes.llm import FakeLLM

    add_config(persona, "user_name: Ada\n")
    services = open_services(
        data_dir=str(tmp_path / "data"),
        persona_dir=str(persona),
        embedded=False,
        entries=[{"id": "fake", "provider": "fake"}],
        providers={"fake": FakeLLM("fake")},
    )
    services.db.close()
    database, settings = open_data(str(tmp_path / "data"), None)  # inspect, kb, persona show: no --persona
    database.close()
    assert settings.persona_dir == str(persona.resolve()) and settings.user_name == "Ada"


def test_without_a_server_embed_model_names_one_of_the_embedded_models(persona):
    from memory.retrieval.embeddings import LocalEmbedder, open_embedder

    assert open_embedder().name == "all-MiniLM-L6-v2"  # the default: float32
    chosen = load_settings(persona, embed_model="all-MiniLM-L6-v2-int8")
    embedder = open_embedder(chosen.embed_url, chosen.embed_model)
    assert isinstance(embedder, LocalEmbedder) and (embedder.name, embedder.precision) == (
        "all-MiniLM-L6-v2-int8",
        "int8",
    )
    with pytest.raises(SettingsError, match=r"embed_model 'bge-large'.*one of all-MiniLM-L6-v2, all-MiniLM-L6-v2-int8"):
        load_settings(persona, embed_model="bge-large")
    assert load_settings(persona, embed_model="bge-large", embed_url="http://127.0.0.1:9/v1").embed_model == "bge-large"
