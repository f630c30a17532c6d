"""A run's artifacts by hand: ``instances`` (stage 1), ``show-instance``, ``provenance``, ``verify-artifacts``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq

from heuresis.artifacts.integrity import remove_damaged, scan
from heuresis.artifacts.lineage import format_lineage, lineage, to_dict
from heuresis.artifacts.logs import stage_logger
from heuresis.artifacts.sealing import require_test_seed
from heuresis.cli.options import config_of, with_config
from heuresis.config import SPLITS
from heuresis.stages.instances import instance_spec, load_truth, write_split


def cmd_instances(args: argparse.Namespace) -> int:
    """Generate the instances (data) and their hidden truth for the chosen families and splits (stage 1)."""
    cfg = config_of(args)
    families = args.family or list(cfg["families"])
    splits = args.split or list(SPLITS)
    log = stage_logger(None)
    out = Path(args.results)
    sealed = "test" in splits and cfg["secrets"]["test_seed"] == "sealed"
    test_seed = require_test_seed(cfg) if sealed else None   # before anything is written
    for fam in families:
        for split in splits:
            write_split(instance_spec(cfg, fam, split), fam, split, int(cfg["instances"][f"n_{split}"]),
                        out / "instances" / fam / split, out / "truth" / fam / split, log=log,
                        test_seed=test_seed if split == "test" else None)
    return 0


def cmd_show_instance(args: argparse.Namespace) -> int:
    """Print an instance's hidden truth (for auditing; never shown to agents)."""
    parts = args.instance.split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"instance id {args.instance!r}: expected family/split/index, e.g. wild/test/0003")
    fam, split, idx = parts
    truths = load_truth(Path(args.results) / "truth" / fam / split)
    if int(idx) not in truths:
        raise ValueError(f"instance id {args.instance!r}: no instance {int(idx)} in {fam}/{split} (indices "
                         f"{min(truths, default=0):04d}..{max(truths, default=-1):04d})")
    truth = truths[int(idx)]
    rec = {k: v for k, v in truth.record.items() if k not in ("dag", "cpdag")}
    print(json.dumps(rec, indent=2, default=str))
    print("true DAG:  ", "; ".join(truth.dag.to_lines()))
    print("true CPDAG:", "; ".join(truth.cpdag.to_lines()))
    return 0


def cmd_provenance(args: argparse.Namespace) -> int:
    """Print an artifact's lineage back to config and seeds; exit 1 when it is stale."""
    row = _row_filter(args.row) if args.row else {}
    if row:
        print(_table_row(args.path, row))
    node = lineage(args.path, root=args.root, max_depth=args.depth)
    if args.json:
        print(json.dumps(to_dict(node), indent=2, sort_keys=True, default=str))
    else:
        print(format_lineage(node, show_config=args.show_config, row=row))
    return 1 if node.stale else 0


def _row_filter(text: str) -> dict[str, str]:
    """``family=wild,method=pc_kci`` as a mapping; a part without ``=`` is refused, named."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key or not value:
            raise ValueError(f"--row {text!r}: {part!r} is not COLUMN=VALUE")
        out[key.strip()] = value.strip()
    return out


def _table_row(path: str, row: dict[str, str]) -> str:
    """The one row of a table (its Parquet numbers) matching ``row``, as ``column: value`` lines."""
    table = Path(path).with_suffix(".parquet")
    if not table.is_file():
        raise ValueError(f"--row needs a table: no {table} beside {path}")
    frame = pq.read_table(table).to_pandas()
    for key, value in row.items():
        if key not in frame.columns:
            raise ValueError(f"--row: {table} has no column {key!r}; its columns: {', '.join(frame.columns)}")
        frame = frame[frame[key].astype(str) == value]
    if len(frame) != 1:
        raise ValueError(f"--row {row}: {len(frame)} rows of {table} match; name columns until one does")
    rec = frame.iloc[0].to_dict()
    return "row of " + str(table) + ":\n" + "\n".join(f"  {k}: {v}" for k, v in rec.items()) + "\n"


def cmd_verify_artifacts(args: argparse.Namespace) -> int:
    """Find truncated or corrupt artifacts; with --delete remove them so that a rerun rebuilds them."""
    if not Path(args.results).is_dir():
        raise FileNotFoundError(f"no results folder {args.results}")
    damaged = scan(args.results)
    for d in damaged:
        print(f"DAMAGED {d.path}: {d.reason}")
    if not damaged:
        print(f"all artifacts under {args.results} are readable and match their recorded digests")
        return 0
    if args.delete:
        removed = remove_damaged(damaged)
        for out in removed:
            print(f"removed {out}")
        # name them as targets: Snakemake does not rerun a job only because an intermediate file is
        # missing when everything downstream exists; a requested file is rebuilt, and then everything
        # downstream of it reruns (its input is newer)
        print("rebuild them and everything downstream with:\n  snakemake all " + " ".join(map(str, removed)))
        return 0
    print("rerun with --delete to remove them, then run snakemake again to rebuild them")
    return 1


def add_commands(sub) -> None:
    """Add this group's commands to the ``heuresis`` parser's subcommands ``sub``."""
    sp = with_config(sub.add_parser("instances", help="stage 1: generate instances (data and hidden truth)"))
    sp.add_argument("--family", action="append", help="family to generate (default: all)")
    sp.add_argument("--split", action="append", choices=["dev", "test"], help="split (default: both)")
    sp.add_argument("--results", default="results", help="results folder (default: results)")
    sp.set_defaults(func=cmd_instances)
    sp = sub.add_parser("show-instance", help="print the hidden truth of one instance")
    sp.add_argument("instance", help="family/split/index, e.g. wild/test/0003")
    sp.add_argument("--results", default="results")
    sp.set_defaults(func=cmd_show_instance)

    sp = sub.add_parser("provenance", help="lineage of an artifact back to config and seeds; flags stale inputs",
                        description="Print the provenance of an artifact (stage, config digest, code version, "
                                    "packages, seeds, command, host, times) and of every input it was computed "
                                    "from, recursively; an input whose bytes changed or that is missing is "
                                    "STALE. Exit status 1 when anything upstream is stale.")
    sp.add_argument("path", help="a Parquet artifact, a table (.md/.tex), a figure (.pdf/.png), "
                                 "an instance folder or data file")
    sp.add_argument("--root", help="folder the workflow ran in (default: current folder, then the artifact's "
                                   "ancestors)")
    sp.add_argument("--depth", type=int, help="follow inputs at most this many levels (default: all)")
    sp.add_argument("--show-config", action="store_true", help="print each record's config slice")
    sp.add_argument("--json", action="store_true", help="the lineage tree as JSON")
    sp.add_argument("--row", metavar="COL=VALUE,...", help="one row of a table (e.g. family=wild,method=pc_kci): "
                                                          "print it, and only the inputs that bear on it")
    sp.set_defaults(func=cmd_provenance)

    sp = sub.add_parser("verify-artifacts", help="find truncated or corrupt artifacts (and remove them)")
    sp.add_argument("results", nargs="?", default="results", help="results folder (default: results)")
    sp.add_argument("--delete", action="store_true",
                    help="remove the outputs holding damaged files so that the next snakemake run rebuilds them")
    sp.set_defaults(func=cmd_verify_artifacts)
