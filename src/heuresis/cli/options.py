"""What several commands share: the ``--config``/``--no-base`` options and the config they name."""

from __future__ import annotations

import argparse

from heuresis.config import BASE_CONFIG, config_files
from heuresis.preflight import load_config


def with_config(sp: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give a command the ``--config`` and ``--no-base`` options (read by :func:`files_of`)."""
    sp.add_argument("--config", action="append", metavar="YAML",
                    help="config file(s), merged in order over the workflow's base config/config.yaml, as "
                         "Snakemake merges --configfile files")
    sp.add_argument("--no-base", action="store_true",
                    help="read only the --config files, without config/config.yaml under them")
    return sp


def files_of(args: argparse.Namespace) -> list[str]:
    """The config files a command reads, in merge order: as the workflow, the base config under the given ones."""
    return config_files(args.config or [], base=None if args.no_base else BASE_CONFIG)


def config_of(args: argparse.Namespace) -> dict:
    """The validated config of a command's ``--config`` files (:func:`heuresis.preflight.load_config`)."""
    return load_config(*files_of(args))
