"""The sealed test seed: ``draw-seed``, ``seal commit``, ``verify-seed`` (docs/provenance.md, Secrets)."""

from __future__ import annotations

import argparse
import json
import sys

from heuresis.artifacts.sealing import (
    SecretUnavailable,
    check_seed,
    commitment,
    commitment_record,
    draw_secret,
    read_test_seed,
    verify_seed,
    write_commitment,
)
from heuresis.cli.options import config_of, with_config
from heuresis.config import config_digest


def cmd_draw_seed(args: argparse.Namespace) -> int:
    """Draw a sealed test seed; print it and its commitment (docs/provenance.md, Secrets)."""
    seed = draw_secret()
    print(f"seed        {seed}\ncommitment  {commitment(seed)}")
    return 0


def cmd_seal_commit(args: argparse.Namespace) -> int:
    """Write the commitment record of the sealed test seed, to be published before the test run."""
    cfg = config_of(args)
    path = cfg["secrets"]["commitment_file"]
    try:
        seed = read_test_seed(cfg["secrets"])
        if seed is None:
            raise SecretUnavailable(f"no sealed seed: set {cfg['secrets']['test_seed_env']} (or "
                                    "secrets.test_seed_file) to the seed `heuresis draw-seed` drew")
        record = write_commitment(seed, path, config_digest=config_digest(cfg), period=args.period)
    except SecretUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"commitment record {path}:\n{json.dumps(record, indent=1)}\n"
          f"Publish it before the test run, e.g.: git add {path} && git commit -m 'Seal commitment' && "
          f"git tag -s seal-{record['created'][:10]} -m 'commitment {record['commitment']}' && git push --tags")
    return 0


def cmd_verify_seed(args: argparse.Namespace) -> int:
    """Check a published test seed against the commitment (or commitment record) published before it."""
    try:
        check_seed(args.seed)
        record = commitment_record(args.record) if args.record else None
    except SecretUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if (record is None) == (args.commitment is None):
        print("error: give the commitment or --record FILE (one of them)", file=sys.stderr)
        return 2
    committed = record["commitment"] if record else args.commitment
    since = f" (recorded {record['created']})" if record else ""
    if verify_seed(args.seed, committed):
        print(f"ok: the seed matches commitment {committed.strip().lower()}{since}")
        return 0
    print(f"MISMATCH: the seed's commitment is {commitment(args.seed)}, not {committed.strip().lower()}{since}")
    return 1


def add_commands(sub) -> None:
    """Add this group's commands to the ``heuresis`` parser's subcommands ``sub``."""
    sp = sub.add_parser("draw-seed", help="draw a sealed test seed and print it with its commitment")
    sp.set_defaults(func=cmd_draw_seed)

    sp = sub.add_parser("verify-seed", help="check a published test seed against its recorded commitment")
    sp.add_argument("seed", help="the published seed (hexadecimal)")
    sp.add_argument("commitment", nargs="?", help="the commitment recorded in provenance and table captions (sha256, hex)")
    sp.add_argument("--record", metavar="FILE", help="the commitment record published before the run instead")
    sp.set_defaults(func=cmd_verify_seed)

    seal = sub.add_parser("seal", help="the sealed test seed's commitment record").add_subparsers(dest="seal",
                                                                                                   required=True)
    sp = with_config(seal.add_parser("commit", help="write the commitment record of the sealed seed (from "
                                     "HEURESIS_TEST_SEED or secrets.test_seed_file), to publish before the test run"))
    sp.add_argument("--period", help="the period the seed is sealed for, e.g. 2027-01..2027-06 (recorded)")
    sp.set_defaults(func=cmd_seal_commit)
