"""Scripted infrastructure failures for tests: episodes whose model calls fail for good.

:func:`install` wraps the episode loop so that the agent of each episode named in ``fail``
(episode ids ``agent/condition_id/family/split/index``) raises ``ConnectionError`` on its first
request, as an API error after the client's retries does, and every episode run is appended to
``log`` (one id a line) so a test counts agent invocations.  :func:`sitecustomize` writes a
``sitecustomize.py`` that installs the same from environment variables in every Python process
started with that folder on ``PYTHONPATH`` (Snakemake's script jobs included).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FAIL_ENV, LOG_ENV = "HEURESIS_TEST_FAIL_EPISODES", "HEURESIS_TEST_EPISODE_LOG"
TESTS = Path(__file__).resolve().parent


def install(fail, log, setattr=None) -> None:
    import builtins

    import heuresis.stages.episodes as episodes

    setattr = setattr or builtins.setattr
    fail = set(fail)
    run = episodes.run_episode

    def run_episode(agent, cond, inp, settings, seed, **records):
        episode_id = f"{agent.name}/{cond.condition_id}/{inp.instance_id}"
        if log:
            with open(log, "a") as fh:
                fh.write(episode_id + "\n")
        if episode_id in fail:
            def respond(messages, tools):
                raise ConnectionError("scripted: the provider kept answering 503 after every retry")
            agent.respond = respond
        return run(agent, cond, inp, settings, seed, **records)

    setattr(episodes, "run_episode", run_episode)


def sitecustomize(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "sitecustomize.py").write_text(
        "import json, os, sys\n"
        f"if os.environ.get({LOG_ENV!r}):\n"
        f"    sys.path.insert(0, {str(TESTS)!r})\n"
        "    import infra_faults\n"
        f"    infra_faults.install(json.loads(os.environ.get({FAIL_ENV!r}, '[]')), os.environ[{LOG_ENV!r}])\n")
    return dest


def env(dest: Path, fail, log: Path) -> dict:
    """Environment of a subprocess that runs with the scripted failures."""
    return {"PYTHONPATH": os.pathsep.join([str(dest), os.environ.get("PYTHONPATH", "")]),
            FAIL_ENV: json.dumps(sorted(fail)), LOG_ENV: str(log)}
