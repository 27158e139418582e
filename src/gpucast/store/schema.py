"""The store's schema as an ordered list of migrations.

``MIGRATIONS[i]`` takes the database from schema version ``i`` to ``i + 1`` (SQLite's
``PRAGMA user_version``). To change the schema, append one SQL script to the list — never edit
or reorder a script that has shipped. Each script runs, with the version bump and a row in
``schema_migrations``, inside one ``BEGIN IMMEDIATE`` transaction, so a crash mid-migration
leaves the previous version intact and concurrent openers apply it exactly once.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

_V1 = """
CREATE TABLE schema_migrations (
    version    INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL
);

-- One row per measured or profiled run. spec_json and result_json hold the full objects
-- (WorkloadSpec, Measurement.to_dict() / WorkloadProfile.to_dict()); the other columns are
-- copies of what listing and exporting need, so those never parse JSON.
CREATE TABLE runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT    NOT NULL,            -- measurement | profile | ...
    workload         TEXT    NOT NULL,
    batch_size       INTEGER NOT NULL CHECK (batch_size >= 1),
    precision        TEXT    NOT NULL,
    mode             TEXT,                        -- train | infer; NULL for a profile
    device           TEXT,                        -- cpu | cuda:N; NULL for a profile
    created_at       TEXT    NOT NULL,            -- ISO 8601, UTC
    spec_json        TEXT    NOT NULL,
    result_json      TEXT    NOT NULL,
    median_s         REAL,
    mean_s           REAL,
    p5_s             REAL,
    p95_s            REAL,
    ci_halfwidth_rel REAL,
    samples_per_s    REAL,
    n_samples        INTEGER,
    stop_reason      TEXT,
    host             TEXT,
    gpu_name         TEXT,
    gpucast_version  TEXT    NOT NULL
);

CREATE INDEX runs_by_kind_workload ON runs (kind, workload, id);
CREATE INDEX runs_by_workload ON runs (workload, id);
"""

# Campaigns (gpucast.store.campaigns): one row per campaign, one per point of its sweep. A
# point becomes done in the same transaction that inserts its run, so a killed campaign never
# loses or duplicates a completed point.
_V2_CAMPAIGNS = """
CREATE TABLE campaigns (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    sweep_path  TEXT,
    sweep_json  TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'interrupted', 'incomplete', 'done')),
    driver_pid  INTEGER,
    driver_host TEXT,
    created_at  TEXT NOT NULL,                 -- ISO 8601, UTC
    updated_at  TEXT NOT NULL
);

CREATE TABLE campaign_points (
    campaign_id TEXT    NOT NULL REFERENCES campaigns (id),
    point_key   TEXT    NOT NULL,
    position    INTEGER NOT NULL,
    point_json  TEXT    NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed')),
    error       TEXT,
    run_id      INTEGER REFERENCES runs (id),
    attempts    INTEGER NOT NULL DEFAULT 0,
    started_at  TEXT,
    finished_at TEXT,
    PRIMARY KEY (campaign_id, point_key)
);

CREATE INDEX campaign_points_by_status ON campaign_points (campaign_id, status, position);
CREATE UNIQUE INDEX campaign_points_one_run ON campaign_points (run_id) WHERE run_id IS NOT NULL;
"""

# Named fitted models (gpucast.store.models_db): e.g. spot lifetimes fitted on a user's own
# preemption trace (`gpucast fit lifetimes --name aws-v100`), used by `--lifetimes NAME`.
# One row per (kind, name): fitting again under the same name replaces it (in one transaction).
_V3_NAMED_MODELS = """
CREATE TABLE named_models (
    kind        TEXT NOT NULL,                  -- e.g. lifetimes
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL,                  -- ISO 8601, UTC
    model_json  TEXT NOT NULL,                  -- Estimator.to_dict(): kind, schema, state
    meta_json   TEXT NOT NULL,                  -- scope (provider, gpu, region) and source
    gpucast_version TEXT NOT NULL,
    PRIMARY KEY (kind, name)
);
"""

# Per-operator / per-kernel times of a measured step (`gpucast measure train|infer --kernels`,
# gpucast.domain.kernels.KernelTrace): at most one trace per run, written in the transaction
# that inserts the run. The summary columns copy what listing needs; trace_json holds it all.
_V4_KERNEL_TRACES = """
CREATE TABLE kernel_traces (
    run_id          INTEGER PRIMARY KEY REFERENCES runs (id),
    activity        TEXT    NOT NULL,             -- cpu (operator times) | cuda (kernel times)
    steps           INTEGER NOT NULL CHECK (steps >= 1),
    n_operators     INTEGER NOT NULL,
    operator_time_s REAL    NOT NULL,             -- every operator of one step, summed
    trace_json      TEXT    NOT NULL
);
"""

#: Append-only. Version N of the schema is the state after MIGRATIONS[:N].
MIGRATIONS: list[str] = [_V1, _V2_CAMPAIGNS, _V3_NAMED_MODELS, _V4_KERNEL_TRACES]


def latest_version() -> int:
    return len(MIGRATIONS)


def split_statements(script: str) -> list[str]:
    """Split a script into complete statements (trigger bodies stay whole).

    ``sqlite3.Connection.executescript`` would COMMIT the surrounding transaction, so
    migrations run statement by statement instead.
    """
    statements: list[str] = []
    buffer = ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            text = buffer.strip()
            if text.strip(";").strip() and not _only_comments(text):
                statements.append(text)
            buffer = ""
    if buffer.strip(";").strip() and not _only_comments(buffer):
        raise ValueError(f"incomplete SQL statement in migration: {buffer.strip()[:80]!r}")
    return statements


def _only_comments(text: str) -> bool:
    lines = [line.split("--", 1)[0].strip() for line in text.splitlines()]
    return not "".join(lines).strip(";").strip()


def apply_migrations(conn: sqlite3.Connection, current: int) -> int:
    """Apply every migration after ``current`` inside the caller's open transaction.

    Returns the new version. The caller holds ``BEGIN IMMEDIATE`` and commits.
    """
    for version in range(current + 1, latest_version() + 1):
        for statement in split_statements(MIGRATIONS[version - 1]):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
            (version, datetime.now(UTC).isoformat()),
        )
        conn.execute(f"PRAGMA user_version = {int(version)}")
    return latest_version()
