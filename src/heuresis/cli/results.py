"""A run's results for others: ``leaderboard``, ``bundle``, ``verify-bundle``, ``view``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from heuresis.artifacts.provenance import provenance_record, utc_now
from heuresis.artifacts.report import save_figure, write_paper_table
from heuresis.cli.options import config_of, with_config
from heuresis.stages.analysis.leaderboard import cost_figure, leaderboard, load_run, merge_runs
from heuresis.stages.bundle import BundleMismatch, verify_bundle, write_bundle
from heuresis.targets.published import load_published_table13
from heuresis.view import export_site, serve


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """One leaderboard from several results folders, written as Parquet, Markdown, LaTeX and the cost figure."""
    started = utc_now()
    cfg = config_of(args)
    folders = list(args.results or cfg["leaderboard"].get("results") or [])
    if not folders:
        raise ValueError("name the results folders to rank (heuresis leaderboard RESULTS [RESULTS ...]) or list "
                         "them under the config key leaderboard.results")
    run = merge_runs([load_run(f) for f in folders])
    families = [f for f in cfg["families"] if f in set(run.scores["family"])]
    published = load_published_table13()
    settings = {k: v for k, v in cfg["leaderboard"].items() if k != "results"}
    numbers, display = leaderboard(run.scores, run.headroom, families, cfg["bootstrap"], (), settings, published)
    out = Path(args.out)
    prov = provenance_record(stage="leaderboard", config={"results": folders, "leaderboard": settings,
                                                           "bootstrap": dict(cfg["bootstrap"])},
                             seeds={"bootstrap": cfg["bootstrap"]["seed"]}, started=started,
                             inputs=[Path(f) / sub for f in folders for sub in ("analysis/episode_scores.parquet",
                                                                                 "headroom/test_scores.parquet")])
    caption = (f"Leaderboard of {len(folders)} results folder(s): {', '.join(folders)}. Published rows: "
               f"{published['source']}; not ranked with the runs' rows.")
    write_paper_table(numbers, display, out / "leaderboard", caption=caption, provenance=prov)
    fig, plotted = cost_figure(numbers)
    save_figure(fig, out / "leaderboard_cost", provenance={**prov, "numbers": plotted.to_dict("records")})
    ranked = numbers[(numbers["block"] == "this run") & (numbers["family"] == "all")]
    print(f"{len(ranked)} results ranked over {len(run.scores)} episodes of {len(folders)} folder(s); wrote "
          f"{out / 'leaderboard.md'} (and .parquet, .tex) and {out / 'leaderboard_cost.png'} (and .pdf)")
    return 0


def cmd_bundle(args: argparse.Namespace) -> int:
    """Pack a results folder's episode record into one archive with a manifest of digests."""
    cfg = config_of(args)
    commitment = Path(cfg["secrets"]["commitment_file"])
    write_bundle(args.results, args.out, with_truth=args.with_truth, lock=Path("requirements/lock.txt"),
                 commitment=commitment if commitment.is_file() else None)
    return 0


def cmd_verify_bundle(args: argparse.Namespace) -> int:
    """Check a bundle's files and recompute every episode's score from the truth; exit 1 naming the first difference."""
    try:
        verify_bundle(args.bundle, truth=args.truth)
    except BundleMismatch as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_view(args: argparse.Namespace) -> int:
    """Serve a run's episodes and game plays on 127.0.0.1, read-only, or export the pages (docs/viewer.md)."""
    results = args.results[0] if len(args.results) == 1 else args.results   # two or more: open_site checks
    if args.export:
        export_site(results, args.export)
        return 0
    try:
        serve(results, port=args.port, open_browser=not args.no_browser)
    except KeyboardInterrupt:
        pass
    return 0


def add_commands(sub) -> None:
    """Add this group's commands to the ``heuresis`` parser's subcommands ``sub``."""
    sp = with_config(sub.add_parser(
        "leaderboard", help="rank the agents of one or more results folders (refused when their instances differ)"))
    sp.add_argument("results", nargs="*", help="results folders (default: the config key leaderboard.results)")
    sp.add_argument("--out", default="leaderboard", help="folder of the written board and figure (default: %(default)s)")
    sp.set_defaults(func=cmd_leaderboard)
    sp = with_config(sub.add_parser("bundle", help="pack a run's episodes, transcripts, scores and provenance into "
                                                  "one archive with digests (heuresis verify-bundle checks it)"))
    sp.add_argument("results", help="results folder")
    sp.add_argument("out", help="archive to write (.tar.gz)")
    sp.add_argument("--with-truth", action="store_true",
                    help="add the hidden truth (a public split, or a sealed one after its seed is revealed)")
    sp.set_defaults(func=cmd_bundle)
    sp = sub.add_parser("verify-bundle", help="check a bundle against its digests and recompute every score from "
                                              "the truth")
    sp.add_argument("bundle", help="archive written by heuresis bundle")
    sp.add_argument("--truth", metavar="RESULTS", help="a results folder with the truth (a sealed split rebuilt from "
                                                         "the revealed seed); default: the bundle's own")
    sp.set_defaults(func=cmd_verify_bundle)
    sp = sub.add_parser("view", help="a local read-only web view of a run's episodes and game plays",
                        description="Serve the run's episodes and game plays on 127.0.0.1 (read-only, offline) and "
                                    "print the URL, or with --export write the same pages as files. See docs/viewer.md.")
    sp.add_argument("results", nargs="*", default=["results"],
                    help="results folder (default: results); two folders: compare their runs, episodes paired")
    sp.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    sp.add_argument("--no-browser", action="store_true", help="do not open a browser")
    sp.add_argument("--export", metavar="DIR", help="write the pages to DIR instead of serving them")
    sp.set_defaults(func=cmd_view)
