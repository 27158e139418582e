"""``gpucast.campaign_run`` and ``campaign_status``: requests, results, stop flag, errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import gpucast
from gpucast.app.campaign import CampaignRunRequest, CampaignStatus, CampaignStatusRequest
from gpucast.domain.campaign import CampaignProgress
from gpucast.domain.errors import DataFormatError, InvalidInputError, InvalidSpecError

FAST = "settings: {max_time_s: 0.2, min_samples: 3, target_ci: 0.5}\n"


def sweep(tmp_path: Path, text: str = f"workloads: [mlp]\nbatch_sizes: [2, 4]\n{FAST}") -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text("devices: [cpu]\n" + text)
    return path


def test_run_with_keyword_options_then_status(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    seen: list[CampaignProgress] = []
    result = gpucast.campaign_run(sweep_file=sweep(tmp_path), db=db, on_progress=seen.append)
    assert result.status == "done" and result.progress.done == 2
    assert seen[0].total == 2 and seen[-1] == result.progress
    assert isinstance(result.campaign, CampaignStatus)
    data = result.to_dict()
    assert data["campaign"] == "tiny" and data["done"] == 2 and not data["resumable"]
    assert len(result.to_frame()) == 2
    by_id = gpucast.campaign_status(campaign="tiny", db=db)
    by_file = gpucast.campaign_status(CampaignStatusRequest(sweep_file=sweep(tmp_path)), db=db)
    assert by_id == by_file == result.campaign
    assert CampaignStatus.from_dict(data) == result.campaign


def test_a_stop_flag_leaves_a_resumable_campaign(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    stop = threading.Event()

    def stop_after_first(p: CampaignProgress) -> None:
        if p.done:
            stop.set()

    request = CampaignRunRequest(sweep_file=sweep(tmp_path))
    first = gpucast.campaign_run(
        request, db=db, should_stop=stop.is_set, on_progress=stop_after_first
    )
    assert first.status == "interrupted" and first.campaign.resumable
    assert first.progress.done == 1 and first.progress.pending == 1
    rest = gpucast.campaign_run(request, db=db)
    assert rest.status == "done" and rest.progress.done == 2


@pytest.mark.parametrize(
    ("options", "text"),
    [
        ({"backend": "slurm"}, "backend"),
        ({"address": "auto"}, "address"),
        ({"retry_failed": "perhaps"}, "retry-failed"),
    ],
)
def test_bad_run_options_are_typed_errors(
    tmp_path: Path, options: dict[str, object], text: str
) -> None:
    db = tmp_path / "c.db"
    with pytest.raises(InvalidSpecError, match=text):
        gpucast.campaign_run(sweep_file=sweep(tmp_path), db=db, **options)
    assert not db.exists()


def test_a_bad_sweep_runs_nothing(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with pytest.raises(DataFormatError, match="nope"):
        gpucast.campaign_run(sweep_file=sweep(tmp_path, "workloads: [nope]\nbatch_sizes: [4]\n"),
                             db=db)  # fmt: skip
    assert not db.exists()


def test_status_needs_one_selector_and_a_known_campaign(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="--campaign"):
        gpucast.campaign_status()
    with pytest.raises(InvalidSpecError, match="--campaign"):
        gpucast.campaign_status(campaign="x", sweep_file=sweep(tmp_path))
    db = tmp_path / "c.db"
    with pytest.raises(InvalidInputError, match="no campaign 'x'"):
        gpucast.campaign_status(campaign="x", db=db)
    assert not db.exists()


def test_status_of_a_sweep_never_run_shows_every_point_pending(tmp_path: Path) -> None:
    """QA session 36 #45: `campaign status never.yaml` was an error; the README says a point
    not run yet is pending. Without a store (none is created) and with one of other runs."""
    db = tmp_path / "c.db"
    never = sweep(tmp_path)
    for _ in range(2):
        status = gpucast.campaign_status(sweep_file=never, db=db)
        assert (status.status, status.total, status.pending, status.done) == (
            "not started", 2, 2, 0,
        )  # fmt: skip
        assert [p["status"] for p in status.points] == ["pending", "pending"]
        assert not status.resumable and status.created_at is None
        assert status.note is not None and "campaign run" in status.note
        assert CampaignStatus.from_dict(status.to_dict()) == status
        if not db.exists():
            other = tmp_path / "other.yaml"
            other.write_text(never.read_text().replace("[2, 4]", "[2]") + "name: other\n")
            gpucast.campaign_run(sweep_file=other, db=db)
    with pytest.raises(InvalidInputError, match=r"^campaign: no campaign 'tiny'"):
        gpucast.campaign_status(campaign="tiny", db=db)  # by id: still an unknown campaign


def test_status_of_a_changed_file_shows_its_points_and_run_says_it_merges(tmp_path: Path) -> None:
    """QA 35 S #8: a file whose axes changed is matched point by point, not by its name."""
    db = tmp_path / "c.db"
    gpucast.campaign_run(sweep_file=sweep(tmp_path), db=db)
    changed = sweep(tmp_path, f"workloads: [mlp]\nbatch_sizes: [4, 8]\n{FAST}")
    status = gpucast.campaign_status(CampaignStatusRequest(sweep_file=changed), db=db)
    assert (status.total, status.done, status.pending) == (2, 1, 1)
    assert status.status == "interrupted" and status.resumable
    assert [p["key"] for p in status.points] == ["mlp/bs4/fp32/cpu/single/r0",
                                                 "mlp/bs8/fp32/cpu/single/r0"]  # fmt: skip
    assert status.note is not None and "1 point not in this file" in status.note
    assert "new `name:`" in status.note
    ran = gpucast.campaign_run(sweep_file=changed, db=db)
    assert ran.status == "done" and (ran.campaign.total, ran.campaign.done) == (2, 2)
    assert ran.campaign.note is not None and "added to it" in ran.campaign.note
    stored = gpucast.campaign_status(campaign="tiny", db=db)
    assert (stored.total, stored.done, stored.note) == (3, 3, None)  # what was stored is kept


def test_status_of_a_grown_file_says_its_new_points_never_ran(tmp_path: Path) -> None:
    """QA session 38: a file given one more batch size after its campaign was done showed
    `interrupted` with no note, as if a run had been cut; the note now says why."""
    db = tmp_path / "c.db"
    gpucast.campaign_run(sweep_file=sweep(tmp_path), db=db)
    grown = sweep(tmp_path, f"workloads: [mlp]\nbatch_sizes: [2, 4, 8]\n{FAST}")
    status = gpucast.campaign_status(sweep_file=grown, db=db)
    assert (status.total, status.done, status.pending) == (3, 2, 1)
    assert status.note is not None
    assert status.note.startswith("1 point of this file not in campaign 'tiny' yet")
    assert "never run" in status.note and "campaign run" in status.note
    ran = gpucast.campaign_run(sweep_file=grown, db=db)
    assert (ran.status, ran.campaign.done, ran.campaign.note) == ("done", 3, None)


def test_a_cuda_sweep_without_cuda_fails_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA session 38: `devices: [cuda]` on a machine without CUDA passed the file's checks and
    every point failed at run time (exit 1, "rerun with --retry-failed")."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    db = tmp_path / "c.db"
    cuda = sweep(tmp_path, f"workloads: [mlp]\nbatch_sizes: [2]\n{FAST}").read_text()
    path = tmp_path / "cuda.yaml"
    path.write_text(cuda.replace("devices: [cpu]", "devices: [cpu, cuda]"))
    with pytest.raises(DataFormatError) as info:
        gpucast.campaign_run(sweep_file=path, db=db)
    assert str(info.value).startswith(f"{path}, line 1, key 'devices': device 'cuda': no CUDA")
    assert "devices: [cpu]" in str(info.value) and not db.exists()
    status = gpucast.campaign_status(sweep_file=path, db=db)  # status does not need the GPU
    assert status.status == "not started" and status.total == 2


def test_more_ranks_than_the_host_holds_fail_the_sweep_before_any_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """QA 40 C11: the ranks-per-host bound (C10) ran at each point, so a sweep measured its
    small points and failed the big one midway; with the local backend it is checked at load.
    The per-point check stays (measure_distributed), and status does not need it."""
    from gpucast.measure.distributed import launcher

    monkeypatch.setattr(launcher, "host_memory_bytes", lambda: 8 * 2**30)  # 24 ranks fit
    db = tmp_path / "c.db"
    path = sweep(tmp_path, f"workloads: [mlp]\nbatch_sizes: [2]\nstrategies: [single, ddp]\n"
                           f"nprocs: [2, 1000]\n{FAST}")  # fmt: skip
    with pytest.raises(DataFormatError) as info:
        gpucast.campaign_run(sweep_file=path, db=db)
    text = str(info.value)
    assert text.startswith(f"{path}, line 5, key 'nprocs': 1,000 processes on this node"), text
    assert text.endswith("; lower nprocs (at most 24 fit)") and "\n" not in text
    assert info.value.exit_code == 2 and not db.exists()
    assert gpucast.campaign_status(sweep_file=path, db=db).total == 3
    single = sweep(tmp_path, f"workloads: [mlp]\nbatch_sizes: [2]\nnprocs: [1000]\n{FAST}")
    assert gpucast.campaign_run(sweep_file=single, db=db).progress.done == 1  # no rank: no bound
