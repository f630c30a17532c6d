"""The workflow's console (heuresis.view.console, the logger plugin ``heuresis``): compact in a terminal.

Against independent truths: the time left is the closed form elapsed / done × jobs left on a
hand-driven clock; a real pseudo-terminal gets the compact console by default and a pipe gets
Snakemake's own (the same run with the plugin switched off); the run's log file keeps every
detail the compact console leaves out.
"""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from heuresis.view.console import MODE_VARIABLE, Progress, console_mode, duration, fit


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_the_mode_is_compact_in_a_terminal_outside_dry_runs_unless_chosen():
    assert console_mode(_Stream(True), dryrun=False, env={}) == "compact"
    assert console_mode(_Stream(False), dryrun=False, env={}) == "full"
    assert console_mode(_Stream(True), dryrun=True, env={}) == "full"            # a dry run's listing is its point
    assert console_mode(_Stream(False), dryrun=False, env={MODE_VARIABLE: "compact"}) == "compact"
    assert console_mode(_Stream(True), dryrun=False, env={MODE_VARIABLE: "Full"}) == "full"
    with pytest.raises(ValueError, match=r"HEURESIS_CONSOLE='quiet': expected 'compact' or 'full'"):
        console_mode(_Stream(True), dryrun=False, env={MODE_VARIABLE: "quiet"})


def test_a_progress_line_states_the_time_left_and_fits_the_width():
    now = [100.0]
    progress = Progress(width=60, clock=lambda: now[0])
    progress.job_info(7, "games_plays", {"agent": "game_random", "mode": "agentic", "scenario": "antenna_trap"})
    progress.job_info(8, "table1", {})
    now[0] = 160.0                                   # 60 s after the start, 3 of 12 done: 60 / 3 * 9 = 180 s left
    progress.finished(7)
    assert progress.line(3, 12) == "[ 3/12  25% | 1m00s, ~3m00s left] games_plays game_random/a…"
    assert len(progress.line(3, 12)) == 60
    progress.finished(8)
    now[0] = 100.0 + 7265
    assert progress.line(12, 12) == "[12/12 100% | 2h01m] table1"          # done: no time left
    assert [duration(s) for s in (0, 59.4, 60, 3599, 3600)] == ["0s", "59s", "1m00s", "59m59s", "1h00m"]
    assert fit("abcdef", 4) == "abc…" and fit("abc", 4) == "abc"


SNAKEFILE = """
rule all:
    input: expand("out/{i}.txt", i=range(4))

rule make:
    output: "out/{i}.txt"
    shell: "echo {wildcards.i} > {output}"
"""


def _run(workdir: Path, *, tty: bool, env: dict) -> str:
    """Snakemake on the tiny workflow with this repository's workflow profile; its console as one text."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--workflow-profile", str(ROOT / "profiles" / "default")]
    if not tty:
        return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, check=True).stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:                              # the follower's side closed: the process ended
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=120) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


def test_a_terminal_gets_one_line_per_job_and_the_log_file_every_detail(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != MODE_VARIABLE} | {"COLUMNS": "72", "TERM": "dumb"}
    runs = {}
    for name, tty in (("terminal", True), ("pipe", False)):
        work = tmp_path / name
        work.mkdir()
        (work / "Snakefile").write_text(SNAKEFILE)
        runs[name] = (work, _run(work, tty=tty, env=env))
    work, text = runs["terminal"]
    lines = text.splitlines()
    progress = [line for line in lines if line.startswith("[")]
    assert [re.match(r"\[(\d)/5 ", line)[1] for line in progress] == ["1", "2", "3", "4", "5"], text
    assert progress[-1].startswith("[5/5 100% | ") and progress[-1].endswith("] all"), progress
    assert all(len(line) <= 72 for line in progress), progress
    assert any(line.startswith("One line per finished job;") for line in lines), text
    assert "reason:" not in text and "output:" not in text and "Select jobs to execute" not in text
    log = Path(re.search(r"Complete log\(s\): (\S+)", text)[1])
    detail = log.read_text()
    assert detail.count("rule make:") == 4 and detail.count("reason:") == 5, detail   # every detail kept there
    # a pipe (CI, a scheduler's output file) gets Snakemake's own console: its job blocks and progress lines
    _, piped = runs["pipe"]
    assert piped.count("rule make:") == 4 and "5 of 5 steps (100%) done" in piped and "One line per" not in piped
    assert all((work / "out" / f"{i}.txt").read_text() == f"{i}\n" for i in range(4))
