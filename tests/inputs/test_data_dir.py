"""The published-data folder (``--data-dir``): a path that is no folder, one without the data."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpucast.domain.errors import InvalidSpecError
from gpucast.inputs.data import published_data_dir


def test_a_data_dir_that_is_no_folder_says_so(tmp_path: Path) -> None:
    # QA 37: --data-dir /nonexist read "has no dlrm_datasets/ or transient/ or cmdare/ folder"
    with pytest.raises(InvalidSpecError) as info:
        published_data_dir(tmp_path / "nope", needs=("dlrm_datasets", "transient"))
    assert str(info.value).startswith("data-dir: does not exist (from --data-dir) (got ")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidSpecError, match=r"^data-dir: is not a folder"):
        published_data_dir(tmp_path / "file", needs=("dlrm_datasets",))
    with pytest.raises(InvalidSpecError, match="has no dlrm_datasets/ or transient/ folder"):
        published_data_dir(tmp_path, needs=("dlrm_datasets", "transient"))  # a folder, no data
    (tmp_path / "transient").mkdir()
    assert published_data_dir(tmp_path, needs=("dlrm_datasets", "transient")) == tmp_path
