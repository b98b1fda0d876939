"""bench/ablation.py's variants: each names a real ranking setting and changes it from what ships."""

import pytest

from bench.ablation import VARIANTS
from memory.retrieval.settings import RetrievalSettings


@pytest.mark.parametrize("setting", sorted(VARIANTS.values()))
def test_each_variant_overrides_a_setting_away_from_its_default(setting):
    name, value = setting.split("=", 1)
    changed = RetrievalSettings(**{name: value})
    assert getattr(changed, name) != getattr(RetrievalSettings(), name)
    assert changed.model_dump(exclude={name}) == RetrievalSettings().model_dump(exclude={name})  # only that one


def test_an_unknown_setting_is_refused_rather_than_measured_as_the_whole():
    with pytest.raises(ValueError):
        RetrievalSettings(**{"when_bost": "0"})
