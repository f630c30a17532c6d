"""Atomic writes never show a partial file; checkpoints resume a killed sweep (heuresis.artifacts.io)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import heuresis
from heuresis.artifacts.io import (
    ArtifactError,
    Checkpoint,
    atomic_write,
    atomic_write_bytes,
    atomic_write_text,
    read_metadata,
    read_table,
    write_table,
)
from heuresis.artifacts.schemas import CALLS, SCHEMA_KEY

SRC = str(Path(heuresis.__file__).resolve().parents[1])


def _child(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    t0 = time.monotonic()
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"child exited with {proc.returncode} before {path.name} appeared")
        if time.monotonic() - t0 > timeout:
            proc.kill()
            raise AssertionError(f"{path.name} did not appear in {timeout} s")
        time.sleep(0.02)


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL


def _hidden_temps(folder: Path, name: str) -> list[Path]:
    return sorted(folder.glob(f".{name}.*"))


# --- atomic writes -------------------------------------------------------------------------------
def test_a_writer_that_raises_halfway_leaves_the_old_content_and_no_temporary(tmp_path):
    target = tmp_path / "table.md"
    atomic_write_text(target, "old content\n")

    def half_then_fail(tmp: Path) -> None:
        tmp.write_text("new cont")             # half of the new content reached the disk ...
        raise RuntimeError("disk on fire")    # ... then the writer fails

    with pytest.raises(RuntimeError, match="disk on fire"):
        atomic_write(target, half_then_fail)
    assert target.read_text() == "old content\n"
    assert list(tmp_path.iterdir()) == [target]       # the temporary file is gone


def test_a_writer_that_raises_leaves_no_target_when_there_was_none(tmp_path):
    target = tmp_path / "sub" / "new.bin"

    def fail(tmp: Path) -> None:
        tmp.write_bytes(b"\x00" * 100)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, fail)
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_a_writer_killed_mid_write_never_shows_a_partial_file(tmp_path):
    """A child process is SIGKILLed while half of the new text is written: the target keeps
    its old content; the half-written bytes exist only in a hidden temporary beside it."""
    target, ready = tmp_path / "report.txt", tmp_path / "ready"
    target.write_text("old\n")
    proc = _child("""
        import sys, time
        from pathlib import Path
        from heuresis.artifacts.io import atomic_write

        def slow(tmp):
            with open(tmp, "w") as fh:
                fh.write("A" * 5000)
                fh.flush()
                Path(sys.argv[2]).touch()      # half written: tell the parent
                time.sleep(120)
                fh.write("B" * 5000)

        atomic_write(sys.argv[1], slow)
    """, str(target), str(ready))
    _wait_for(ready, proc)
    assert target.read_text() == "old\n"            # mid-write: readers see the old file
    _kill(proc)
    assert target.read_text() == "old\n"            # after the kill: still the old file
    temps = _hidden_temps(tmp_path, "report.txt")
    assert len(temps) == 1 and temps[0].read_text() == "A" * 5000   # the partial write was real
    atomic_write_text(target, "new\n")             # the next write replaces the old file
    assert target.read_text() == "new\n"


def test_a_parquet_artifact_killed_mid_write_stays_the_old_readable_one(tmp_path):
    """The same for an artifact: a child streams row groups into a new version and is killed
    after the first; the old artifact still reads, the temporary is a truncated Parquet file."""
    out, ready = tmp_path / "shard.calls.parquet", tmp_path / "ready"
    old = {c: [] for c in CALLS.schema.names}
    write_table(old, out, CALLS, {"note": "old"})
    proc = _child("""
        import sys, time
        from pathlib import Path
        import pyarrow as pa, pyarrow.parquet as pq
        from heuresis.artifacts.io import atomic_write

        table = pa.table({"x": list(range(100_000))})
        def stream(tmp):
            with pq.ParquetWriter(tmp, table.schema) as w:
                w.write_table(table)
                Path(sys.argv[2]).touch()
                time.sleep(120)
                w.write_table(table)

        atomic_write(sys.argv[1], stream)
    """, str(out), str(ready))
    _wait_for(ready, proc)
    _kill(proc)
    assert read_table(out, CALLS).num_rows == 0 and read_metadata(out)["note"] == "old"
    (temp,) = _hidden_temps(tmp_path, out.name)
    assert temp.stat().st_size > 0
    with pytest.raises(pa.ArrowInvalid):
        pq.read_table(temp)                         # what a non-atomic writer would have left


def test_write_table_that_fails_keeps_the_old_artifact(tmp_path, monkeypatch):
    out = tmp_path / "calls.parquet"
    write_table({c: [] for c in CALLS.schema.names}, out, CALLS)
    before = out.read_bytes()

    def torn(table, where, **_kw):
        Path(where).write_bytes(b"PAR1 torn")
        raise OSError("no space left on device")

    monkeypatch.setattr(pq, "write_table", torn)
    with pytest.raises(OSError, match="no space left"):
        write_table({c: [] for c in CALLS.schema.names}, out, CALLS)
    assert out.read_bytes() == before and list(tmp_path.iterdir()) == [out]


def test_written_files_get_the_usual_permissions(tmp_path):
    plain = tmp_path / "plain.txt"
    plain.write_text("x")                          # what open(..., "w") creates under this umask
    p = atomic_write_text(tmp_path / "atomic.txt", "x")
    assert p.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777   # mkstemp alone would give 0o600


def test_artifact_round_trip_and_refusals(tmp_path):
    out = tmp_path / "c.parquet"
    rows = {c: [None] for c in CALLS.schema.names}
    rows["episode_id"] = ["e/1"]
    write_table(rows, out, CALLS, {"extra": {"b": 1, "a": 2}})
    assert read_table(out, CALLS).column("episode_id").to_pylist() == ["e/1"]
    meta = read_metadata(out)
    assert meta["heuresis.schema"] == "calls" and meta["extra"] == '{"a": 2, "b": 1}'
    assert pq.read_schema(out).metadata[SCHEMA_KEY] == b"calls"
    with pytest.raises(ArtifactError, match="does not exist"):
        read_table(tmp_path / "missing.parquet", CALLS)
    atomic_write_bytes(tmp_path / "bad.parquet", out.read_bytes()[:-20])
    with pytest.raises(ArtifactError, match="truncated or corrupt"):
        read_table(tmp_path / "bad.parquet", CALLS)
    pq.write_table(pa.table({"x": [1]}), tmp_path / "foreign.parquet")
    with pytest.raises(ArtifactError, match="holds schema ''"):
        read_table(tmp_path / "foreign.parquet", CALLS)


# --- checkpoints ---------------------------------------------------------------------------------------
SWEEP = """
    import json, os, signal, sys
    from heuresis.artifacts.io import Checkpoint

    artifact, log, kill_after = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ckpt = Checkpoint(artifact, key="k1")
    for unit in range(10):
        if unit in ckpt:
            continue
        with open(log, "a") as fh:
            fh.write(f"{unit}\\n")
        ckpt.save(unit, {"square": unit * unit})
        if unit == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)   # the job is killed between two units
    values = ckpt.values(range(10))
    with open(artifact, "w") as fh:
        json.dump(values, fh)
    ckpt.finish()
"""


def test_a_killed_sweep_resumes_where_it_stopped(tmp_path):
    art, log = tmp_path / "sweep.json", tmp_path / "ran.log"
    proc = _child(SWEEP, str(art), str(log), "4")
    assert proc.wait(timeout=120) == -signal.SIGKILL and not art.exists()
    resumed = Checkpoint(art, key="k1")
    assert len(resumed) == 5 and all(u in resumed for u in range(5)) and 5 not in resumed
    assert resumed.get(3) == {"square": 9}
    assert Checkpoint(art, key="another config").__len__() == 0      # stale parts are not reused

    proc = _child(SWEEP, str(art), str(log), "-1")                   # the rerun, not killed
    assert proc.wait(timeout=120) == 0
    assert log.read_text().split() == [str(u) for u in range(10)]    # every unit ran exactly once
    import json

    assert json.loads(art.read_text()) == [{"square": u * u} for u in range(10)]
    assert not Path(str(art) + ".parts").exists()                    # finished: the parts are gone


def test_failed_units_go_into_the_artifact_but_are_retried(tmp_path):
    art = tmp_path / "plays.parquet"
    ckpt = Checkpoint(art, key="k")
    ckpt.save(0, {"row": "ok 0"})
    ckpt.fail(1, {"row": "failed 1"})
    ckpt.save(2, {"row": "ok 2"})
    assert ckpt.values([0, 1, 2]) == [{"row": "ok 0"}, {"row": "failed 1"}, {"row": "ok 2"}]
    assert ckpt.failed == [1] and 1 not in ckpt
    assert ckpt.finish() == 1 and Path(str(art) + ".parts").is_dir()  # kept for the retry
    again = Checkpoint(art, key="k")
    assert sorted(u for u in range(3) if u in again) == [0, 2]        # the failed unit is redone
    with pytest.raises(KeyError, match="unit '1'"):
        again.get(1)
    again.save(1, {"row": "ok 1"})
    assert again.finish() == 0 and not Path(str(art) + ".parts").exists()


def test_unit_names_with_slashes_do_not_collide(tmp_path):
    ckpt = Checkpoint(tmp_path / "j.parquet", key="k")
    names = ["a/b_c", "a_b/c", "a_b_c", "a/b/c"]
    for k, name in enumerate(names):
        ckpt.save(name, k)
    again = Checkpoint(tmp_path / "j.parquet", key="k")
    assert [again.get(n) for n in names] == [0, 1, 2, 3]
    assert len(list((tmp_path / "j.parquet.parts").glob("*.json"))) == 4


def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path):
    """A writer killed between its temporary and the rename leaves ``.<name>.*.tmp``; the next write of the same
    file (the rerun of its job) removes it, and no other file's temporary."""
    target, other = tmp_path / "graphs.parquet", tmp_path / "nodes.parquet"
    left = tmp_path / ".graphs.parquet.abc123.tmp"
    left.write_bytes(b"half")
    theirs = tmp_path / ".nodes.parquet.def456.tmp"
    theirs.write_bytes(b"half")
    atomic_write_bytes(target, b"whole")
    assert target.read_bytes() == b"whole" and not left.exists() and theirs.exists() and not other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".nodes.parquet.def456.tmp", "graphs.parquet"]
