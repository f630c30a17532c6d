"""The ``heuresis`` command: one subcommand per workflow stage, plus inspection helpers.

The workflow runs the stages through Snakemake (which passes the validated config); the
commands here run the same package functions by hand, from config files. Each module holds one
group of commands, their options beside their functions (``add_commands``); this one assembles
the parser and runs a command.
"""

from __future__ import annotations

import argparse
import sys

from heuresis import __version__
from heuresis.artifacts.io import ArtifactError
from heuresis.cli import artifacts, costs, games, results, seeds, serve

__all__ = ["build_parser", "main"]

#: The command groups, in the order ``heuresis --help`` lists their commands.
GROUPS = (costs, artifacts, seeds, results, games, serve)


def build_parser() -> argparse.ArgumentParser:
    """Build the ``heuresis`` argument parser, one subparser per command."""
    p = argparse.ArgumentParser(prog="heuresis", description=(__doc__ or "").splitlines()[0])
    p.add_argument("--version", action="version", version=f"heuresis {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.add_commands(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the ``heuresis`` command; on bad input print the error and return status 2.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status.
    """
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, ArtifactError) as exc:
        print(f"heuresis {args.command}: error: {exc}", file=sys.stderr)
        return 2
