"""Models added at run time (managers/models.py `add`/`remove`, llm/registry.py `adopt`): the registry takes them
and lets them go, a configured model cannot be removed, an added one's key is only a 0600 file's path, and the
health check's refusal saves nothing. (Against a real server, in Chromium:
tests/integration/test_first_hour_browser.py.)"""

from __future__ import annotations

import stat

import pytest

from llm import LLMRegistry
from llm.discovery import normalize_base_url
from managers import ManagerDeps, Managers
from managers.models import ModelNotFound, RegistryError, ServerCheckFailed
from memory import Database
from persona.settings import load_settings
from tests.fakes.managers import managers_over


def test_the_registry_adopts_and_forgets_models_added_at_run_time():
    registry = LLMRegistry([{"id": "embedded", "provider": "fake", "priority": 0}])
    registry.adopt(
        {"mine": {"provider": "openai", "model": "m", "priority": 50, "config": {"base_url": "http://x/v1"}}}
    )
    assert registry.ids == ["mine", "embedded"] and registry.entry("mine")["added"]
    registry.adopt({})
    assert registry.ids == ["embedded"]


def test_base_urls_are_normalized_to_the_api_root():
    assert normalize_base_url("http://127.0.0.1:11434") == "http://127.0.0.1:11434/v1"
    assert normalize_base_url("http://127.0.0.1:1234/v1/") == "http://127.0.0.1:1234/v1"
    with pytest.raises(ValueError):
        normalize_base_url("127.0.0.1:1234")


def test_add_keeps_the_key_in_a_0600_file_and_remove_forgets_it(tmp_path):
    settings = load_settings(data_dir=str(tmp_path))
    database = Database.open(str(tmp_path), None)
    try:
        with database.unit() as repos:
            house = Managers(repos, ManagerDeps(settings=settings))
            row = house.models.add(
                "http://127.0.0.1:9/v1", "qwen3:8b", name="My Qwen", api_key="sk-secret", check=False
            )
            assert row["id"] == "my-qwen" and row["priority"] == 50 and row["enabled"]
            with pytest.raises(RegistryError):
                house.models.add("http://127.0.0.1:9/v1", "other", name="my qwen", check=False)  # same id
        key_file = tmp_path / "secrets" / "llm-my-qwen.key"
        assert key_file.read_text() == "sk-secret" and stat.S_IMODE(key_file.stat().st_mode) == 0o600
        with database.unit() as repos:
            entry = repos.config.added_llms()["my-qwen"]
            assert entry["config"]["api_key_file"] == str(key_file.resolve()) and "sk-secret" not in str(entry)
            assert "sk-secret" not in str(repos.config.all()) and repos.llm_registry.all()[0].id == "my-qwen"
            models = managers_over(repos).models
            with pytest.raises(ModelNotFound):
                models.remove("nobody")
            models.remove("my-qwen")
        assert not key_file.exists()
        with database.unit() as repos:
            assert repos.config.added_llms() == {} and repos.llm_registry.all() == []
    finally:
        database.close()


def test_a_server_that_fails_the_check_is_not_saved(tmp_path):
    database = Database.open(str(tmp_path), None)
    try:
        with database.unit() as repos:
            with pytest.raises(ServerCheckFailed, match="did not answer"):
                managers_over(repos).models.add("http://127.0.0.1:9/v1", "m")  # port 9: nothing listens
            assert repos.config.added_llms() == {}
    finally:
        database.close()
