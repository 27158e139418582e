"""Named models in the store: saved by name, replaced by name, unknown names listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import InvalidInputError
from gpucast.store.db import Store
from gpucast.store.schema import latest_version


def test_save_replace_and_list(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db").open() as store:
        assert store.schema_version == latest_version() >= 3
        store.save_named_model("lifetimes", "aws-v100", {"v": 1}, {"gpu": "V100"})
        store.save_named_model("lifetimes", "aws-v100", {"v": 2}, {"gpu": "V100"})
        store.save_named_model("lifetimes", "gcp-a100", {"v": 3}, {})
        model, meta = store.named_model("lifetimes", "aws-v100")
        assert model == {"v": 2} and meta == {"gpu": "V100"}
        assert sorted(n for n, _ in store.named_models("lifetimes")) == ["aws-v100", "gcp-a100"]
        assert store.named_models("other") == []


def test_unknown_name_lists_the_known_ones(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db").open() as store:
        store.save_named_model("lifetimes", "aws-v100", {}, {})
        with pytest.raises(InvalidInputError, match="aws-v100") as caught:
            store.named_model("lifetimes", "aws-v10")
        assert "gpucast fit lifetimes" in str(caught.value)
        with pytest.raises(InvalidInputError, match="name"):
            store.save_named_model("lifetimes", "  ", {}, {})
