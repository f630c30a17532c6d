"""Every command README.md shows, as CI runs it (docs/testing.md, "CI").

A command is what the README shows a user to type:

* a line of a ```bash block (a line ending in ``\\`` continues on the next; ``#`` comment lines and
  trailing ``  # ...`` comments are dropped); in the Quick start, the command under ``# N. ...`` is
  command N;
* the first cell of a row of the "Other useful commands" table;
* an inline code span in prose that starts with a program a user runs (:data:`PROGRAMS`).

``run`` runs each, in the order the README shows them, in the repository folder, in the active
environment (the one README commands 1 and 2 installed), so a command that reads ``results/``
finds command 1's results rather than rebuilding them. How each is run:

* **as written** — the default;
* **Quick start 1 and 2** — by ``.ci/run``'s own steps, each in the environment it describes;
* **the local model's install** (:func:`local_install`) — as written, by ``.ci/run`` through
  ``local-install`` before the tests, which need it (tests/test_local_llm.py);
* **in a fresh virtual environment** — :data:`FRESH_VENV` (an install meant for a new environment);
* **with its input** — :data:`STDIN`: an interactive command gets its input on stdin and must print
  the expected text;
* **as a dry run** — a command whose config plans LLM agents that need a paid provider's key
  (impossible offline) runs with the key variables that config needs set to ``dummy``, and a
  ``snakemake`` command with ``-n``: it proves the command parses, the config validates and the
  workflow plans, and calls no provider;
* **not run** — :data:`NOT_RUN`, each with its reason.

``python3 .ci/readme_commands.py list`` prints every command and how CI runs it;
``quick-start N`` prints Quick start command N (for ``.ci/run``); ``local-install`` runs the
local model's install as written; ``run`` runs the others (all but Quick start 1 and 2 and that
install) and prints each one's wall time; exit status 1 when any failed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: An inline code span is a command when its first word is one of these.
PROGRAMS = ("python3", "python", "pip", "snakemake", "heuresis", "bash", "apt-get", "conda", "sudo")

#: Commands run in a new virtual environment of their own, with why.
FRESH_VENV = {
    "python3 -m pip install --no-deps --require-hashes -r requirements/lock.txt"
    " && python3 -m pip install --no-deps -e . && python3 -m pip check":
        "the locked install is for a new environment; in command 1's it would change nothing or, with a new "
        "release out, the versions the tests run on",
}

#: Interactive commands: the input CI types and a text the output must contain.
STDIN = {
    "heuresis play antenna_trap": (
        "history\nquery wind_speed\ndeploy 20 antenna=0 camera=10 gun=10\nreport a bare antenna goes silent\n"
        'submit {"antenna": 0, "camera": 10, "gun": 10, "engine": 15, "wing": 15}\n', "final: "),
}

#: Servers: CI starts the command as written, waits for the URL it prints, fetches that page (it must
#: answer 200), then stops it.
SERVERS = {"heuresis view"}

#: Commands CI does not run, each with why (keep it short: every other command runs).
NOT_RUN = {
    "apt-get install bubblewrap": "a system package (needs root): .ci/run installs it with apt-get in its first step",
    "conda env create -f environment.yml": "conda is not part of CI's image; CI installs with pip (Quick start)",
    "bash requirements/compile.sh VENV": "VENV is a placeholder, and the script rewrites requirements/lock.txt, "
                                         "a tracked file, from an environment the tests passed in",
    "heuresis serve-episode": "the command's name in prose; the full command is in the MCP block, which runs",
    "heuresis forecast --pilot 8": "plays paid episodes of the paper config's models (their keys, the network); "
                                   "tests/test_pilot.py runs it through the workflow against a local server",
}

#: Quick start commands .ci/run runs itself (install, workflow, tests), each in its own environment.
CI_STEPS = (1, 2)

#: Per-command limit (seconds): the local model's run is the longest command.
TIMEOUT_S = 40 * 60


@dataclass(frozen=True)
class Command:
    """A command of the README: its text (one line), the section it is in, its offset in the file."""

    text: str
    section: str
    offset: int
    number: int | None = None   # Quick start: the N of '# N. ...'


def _strip_comment(line: str) -> str:
    return re.sub(r"\s+#(\s.*)?$", "", line).rstrip()


def readme_commands(text: str | None = None) -> list[Command]:
    """Every command the README shows, in the order it shows them (a command shown twice: once)."""
    text = README.read_text() if text is None else text
    sections = [(m.start(), m.group(1)) for m in re.finditer(r"^## (.+)$", text, re.M)]

    def section(at: int) -> str:
        return next((name for start, name in reversed(sections) if start <= at), "")

    found: list[Command] = []
    fences = list(re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S))
    for fence in fences:
        if fence.group(1) != "bash":
            continue
        number, pending = None, ""
        pos = fence.start(2)
        for line in fence.group(2).splitlines(keepends=True):
            at, pos = pos, pos + len(line)
            stripped = line.strip()
            if not pending and stripped.startswith("#"):
                m = re.match(r"#\s*(\d+)\.\s", stripped)
                number = int(m.group(1)) if m else number
                continue
            if not stripped:
                continue
            body = _strip_comment(stripped)
            if body.endswith("\\"):
                pending += body[:-1].rstrip() + " "
                continue
            cmd = " ".join((pending + body).split())
            pending = ""
            found.append(Command(cmd, section(at), at, number if section(at) == "Quick start" else None))
            number = None
    inside = [(f.start(), f.end()) for f in fences]
    for m in re.finditer(r"(?<!`)`([^`\n]+)`(?!`)", text):
        if any(a <= m.start() < b for a, b in inside):
            continue
        span = m.group(1).strip()
        words = span.split()
        if len(words) > 1 and words[0] in PROGRAMS:   # a program's name alone is not a command
            found.append(Command(" ".join(words), section(m.start()), m.start()))
    seen: set[str] = set()
    out = []
    for c in sorted(found, key=lambda c: c.offset):
        if c.text not in seen:
            seen.add(c.text)
            out.append(c)
    return out


def table_commands(text: str | None = None) -> list[str]:
    """The first cells of the "Other useful commands" table (what :func:`readme_commands` must include)."""
    text = README.read_text() if text is None else text
    part = text.split("## Other useful commands", 1)[1].split("\n## ", 1)[0]
    return [" ".join(m.group(1).split()) for m in re.finditer(r"^\| `([^`]+)` \|", part, re.M)]


def quick_start(n: int, text: str | None = None) -> str:
    """Quick start command ``n``."""
    hits = [c.text for c in readme_commands(text) if c.number == n]
    if len(hits) != 1:
        raise SystemExit(f"README Quick start: command {n} not found (or found {len(hits)} times)")
    return hits[0]


def config_files(command: str) -> list[str]:
    """The config files a command reads: its ``--configfile`` (Snakemake) and ``--config`` (heuresis)
    files over the base config ``config/config.yaml``, as the workflow reads them."""
    words = shlex.split(command.replace("&&", " ; "))
    files, take = [], False
    for i, w in enumerate(words):
        if w.startswith("-") or w == ";":
            take = w == "--configfile"
            if w == "--config" and i + 1 < len(words):
                files.append(words[i + 1])
            continue
        if take:
            files.append(w)
    return ["config/config.yaml", *(f for f in files if f != "config/config.yaml")]


def reads_config(command: str) -> bool:
    """Whether a command reads the workflow's config: ``snakemake``, or a ``heuresis`` subcommand with ``--config``."""
    words = shlex.split(command)
    if "snakemake" in words:
        return True
    if "heuresis" not in words or words.index("heuresis") + 1 >= len(words):
        return False
    from heuresis.cli import build_parser

    subcommands = next(a for a in build_parser()._actions if a.dest == "command").choices
    sub = subcommands.get(words[words.index("heuresis") + 1])
    return sub is not None and "--config" in sub._option_string_actions


def paid_keys(command: str) -> list[str]:
    """The key variables of the paid providers the command's config would call, when they are not set.

    The LLM agents the config uses (episodes, leakage, games) whose model needs a key: an agent
    with ``requires_key: false`` (a local server) needs none, and its address variable is not a key.
    """
    if not reads_config(command):
        return []
    from heuresis.agents.llm import llm_agents_in_use, missing_credentials
    from heuresis.config import read_config_files

    cfg = read_config_files(*(ROOT / f for f in config_files(command)))   # as merged: a plug-in agent need not be installed yet
    return sorted({v for spec in llm_agents_in_use(cfg).values() if spec.get("requires_key") is not False
                   for v in missing_credentials(spec) if v != spec.get("api_base_env")})


def is_local_install(command: str) -> bool:
    """Whether a command installs the ``[local]`` extra (the local model; llama.cpp compiled)."""
    return "pip install" in command and '".[local]"' in command


def local_install(commands: list[Command]) -> Command:
    """The README's one install of the ``[local]`` extra."""
    hits = [c for c in commands if is_local_install(c.text)]
    if len(hits) != 1:
        raise SystemExit(f"README: the [local] install not found (or found {len(hits)} times)")
    return hits[0]


def how(command: Command) -> str:
    """How CI runs a command, in words (``list`` prints it)."""
    if command.number in CI_STEPS:
        return f"by .ci/run: Quick start command {command.number}"
    if is_local_install(command.text):
        return "as written, by .ci/run (local-install) before the tests, in the tests' environment"
    if command.text in NOT_RUN:
        return "not run: " + NOT_RUN[command.text]
    if command.text in FRESH_VENV:
        return "in a fresh virtual environment: " + FRESH_VENV[command.text]
    if command.text in STDIN:
        return f"with its input on stdin, its output must contain {STDIN[command.text][1]!r}"
    if command.text in SERVERS:
        return "as a server: started as written, the page at the URL it prints fetched, then stopped"
    keys = paid_keys(command.text)
    if keys:
        dry = "as a dry run (-n)" if command.text.startswith("snakemake") else "as written"
        return f"{dry} with {', '.join(keys)} set to 'dummy' (its config's LLM agents need paid keys)"
    return "as written"


def dry_run(command: str) -> str:
    """A ``snakemake`` command with ``-n`` (dry run) after the program name; other commands unchanged."""
    return re.sub(r"^snakemake ", "snakemake -n ", command)


def _serve_once(cmd: str, env: dict, wait_s: float = 120.0) -> bool:
    """Start a server command, fetch the first http:// URL it prints, stop it; True when it answered 200."""
    import urllib.request

    proc = subprocess.Popen(["bash", "-c", f"exec {cmd}"], cwd=ROOT, env={**env, "BROWSER": "true"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                return False
            sys.stdout.write(line)
            m = re.search(r"http://127\.0\.0\.1:\d+/\S*", line)
            if m:
                with urllib.request.urlopen(m.group(0), timeout=30) as resp:
                    body = resp.read()
                    print(f"   fetched {m.group(0)}: HTTP {resp.status}, {len(body)} bytes", flush=True)
                    return resp.status == 200 and len(body) > 0
        return False
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_local_install(commands: list[Command]) -> int:
    """Run the README's ``[local]`` install as written, in this folder and the active environment."""
    c = local_install(commands)
    print(f"== README ({c.section}; {how(c)}): {c.text}", flush=True)
    t0 = time.monotonic()
    rc = subprocess.run(["bash", "-euo", "pipefail", "-c", c.text], cwd=ROOT, timeout=TIMEOUT_S).returncode
    print(f"== {'ok' if rc == 0 else 'FAILED'} in {time.monotonic() - t0:.0f} s: {c.text}", flush=True)
    return rc


def _record_failure(cmd: str, output: str, lines: int = 40) -> None:
    """Append a failed command and the end of its output to the file ``.ci/run`` prints last (HEURESIS_CI_FAILURES)."""
    path = os.environ.get("HEURESIS_CI_FAILURES")
    if path:
        tail = "\n".join(output.rstrip().splitlines()[-lines:])
        with open(path, "a") as f:
            f.write(f"README command FAILED: {cmd}\n  (the last {lines} lines of its output)\n{tail}\n")


def run_all(commands: list[Command]) -> int:
    """Run every command (but Quick start 1 and 2, the ``[local]`` install and :data:`NOT_RUN`); print each one's time."""
    failed, times = [], []
    # an install into a fresh environment mostly waits on downloads and disk: it runs beside the others
    background = []
    for c in commands:
        if c.text in FRESH_VENV and c.number not in CI_STEPS and c.text not in NOT_RUN:
            venv = Path(tempfile.mkdtemp(prefix="heuresis-readme-")) / "venv"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
            log = open(venv.parent / "output.txt", "w+")   # read back when the command ends
            print(f"== README ({c.section}; {how(c)}), started beside the others: {c.text}", flush=True)
            background.append((c.text, log, time.monotonic(), subprocess.Popen(
                ["bash", "-euo", "pipefail", "-c", c.text], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                text=True)))
    for c in commands:
        if c.number in CI_STEPS or c.text in NOT_RUN or is_local_install(c.text):
            print(f"-- skipped ({how(c)}): {c.text}", flush=True)
            continue
        env, cmd, stdin, expect = dict(os.environ), c.text, None, None
        if c.text in FRESH_VENV:
            continue
        if c.text in STDIN:
            stdin, expect = STDIN[c.text]
        else:
            keys = paid_keys(c.text)
            env.update(dict.fromkeys(keys, "dummy"))
            cmd = dry_run(c.text) if keys else c.text
        print(f"== README ({c.section}; {how(c)}): {cmd}", flush=True)
        t0 = time.monotonic()
        if c.text in SERVERS:
            ok = _serve_once(cmd, env)
            took = time.monotonic() - t0
            times.append((took, cmd, ok))
            if not ok:
                failed.append(cmd)
                _record_failure(cmd, "(its output is above, where it ran)")
            print(f"== {'ok' if ok else 'FAILED'} in {took:.0f} s: {cmd}", flush=True)
            continue
        output = ""
        try:
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", cmd], cwd=ROOT, env=env, input=stdin,
                                  text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
            ok, output = proc.returncode == 0, proc.stdout
            sys.stdout.write(output[-6000:] if expect is not None else output)
            if expect is not None:
                ok = ok and expect in output
        except subprocess.TimeoutExpired as exc:
            ok = False
            output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            sys.stdout.write(output)
            print(f"timed out after {TIMEOUT_S} s", flush=True)
        took = time.monotonic() - t0
        times.append((took, cmd, ok))
        if not ok:
            failed.append(cmd)
            _record_failure(cmd, output)
        print(f"== {'ok' if ok else 'FAILED'} in {took:.0f} s: {cmd}", flush=True)
    for cmd, log, t0, proc in background:
        try:
            ok = proc.wait(timeout=max(1.0, TIMEOUT_S - (time.monotonic() - t0))) == 0
        except subprocess.TimeoutExpired:
            proc.kill()
            ok = False
        took = time.monotonic() - t0
        log.seek(0)
        sys.stdout.write(log.read()[-3000:])
        times.append((took, cmd, ok))
        if not ok:
            failed.append(cmd)
            log.seek(0)
            _record_failure(cmd, log.read())
        print(f"== {'ok' if ok else 'FAILED'} in {took:.0f} s (beside the others): {cmd}", flush=True)
    print("README commands, wall time:")
    for took, cmd, ok in times:
        print(f"  {took:7.0f} s  {'ok    ' if ok else 'FAILED'}  {cmd}")
    if failed:
        print(f"{len(failed)} README command(s) failed:\n  " + "\n  ".join(failed), file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["quick-start"] and len(argv) == 2:
        print(quick_start(int(argv[1])))
        return 0
    if argv == ["list"]:
        for c in readme_commands():
            print(f"{c.text}\n    [{c.section}] {how(c)}")
        return 0
    if argv == ["local-install"]:
        return run_local_install(readme_commands())
    if argv == ["run"]:
        return run_all(readme_commands())
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
