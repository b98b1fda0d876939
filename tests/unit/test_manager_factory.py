"""managers/__init__.py: a door builds its managers once, with explicit dependencies, and each unit acts for
someone."""

from __future__ import annotations

from pathlib import Path

import pytest

from managers import ManagerDeps, ManagerFactory, MissingDependency
from managers.audience import OWNER, Audience, Role
from memory import Database
from persona.settings import Settings


def test_each_unit_gets_the_doors_dependencies_as_they_are_then_and_names_its_actor_in_the_history(tmp_path: Path):
    db = Database.open(tmp_path)
    asked: list[str] = []

    def deps() -> ManagerDeps:  # the settings as they are when a unit first needs them: each time a new name
        asked.append("deps")
        return ManagerDeps(settings=Settings(data_dir=str(tmp_path), name=f"reading {len(asked)}"))

    managers = ManagerFactory(db, deps)
    try:
        with managers.unit(OWNER) as house:
            assert asked == []  # nothing read until a manager needs it
            house.goals.add("learn the tides")
            assert house.deps.settings.name == "reading 1" and house.deps.settings.name == "reading 1"
        with managers.unit(Audience(Role.PEER, peer="tester")) as house:
            assert house.deps.settings.name == "reading 2"  # read again for the next unit
            house.goals.add("answer tester")
        with db.reading() as repos:
            assert sorted(c.actor for c in repos.history.list(tier="goal")) == ["human", "peer"]
        with managers.reading() as house:
            with pytest.raises(MissingDependency, match="model registry"):
                house.threads.window()
    finally:
        db.close()
