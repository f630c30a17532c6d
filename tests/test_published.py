"""The published Table 2 data file and the side-by-side target (heuresis.targets.published)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from heuresis.artifacts.report import write_paper_table
from heuresis.stages import headroom_targets as targets
from heuresis.targets.published import load_published_table2, published_table2_path, table2_vs_paper

DATA = Path(__file__).resolve().parents[1] / "src/heuresis/data/table2_published.yaml"

# the paper's Table 2 as printed (transcribed independently of the data file)
PAPER = {"lg": (2.4, 0.23, 0.121), "anm": (1.4, 0.26, 0.078), "hetero": (1.0, 0.39, 0.049),
         "wild": (3.0, 0.05, 0.169), "mixed": (1.2, 0.36, 0.059), "gauntlet": (2.4, 0.09, 0.134)}


def test_data_file_holds_the_published_numbers_and_their_source():
    assert published_table2_path().resolve() == DATA.resolve()
    pub = load_published_table2()
    assert "Table 2" in pub["source"]
    assert {f: (e["wrong_deletions"], e["share_none"], e["oracle_gain"]) for f, e in pub["families"].items()} == PAPER


@pytest.mark.parametrize("edit, message", [
    ("families:\n  lg: {wrong_deletions: 2.4, share_none: 1.3, oracle_gain: 0.1}\n", "families.lg.share_none"),
    ("families:\n  lg: {wrong_deletions: x, share_none: 0.2, oracle_gain: 0.1}\n", "families.lg.wrong_deletions"),
    ("families:\n  lg: {wrong_deletions: 2.4, share_none: 0.2}\n", "families.lg: expected fields"),
])
def test_bad_data_file_names_the_key(tmp_path, edit, message):
    bad = tmp_path / "t2.yaml"
    bad.write_text("source: somewhere\n" + edit)
    with pytest.raises(ValueError, match=message):
        load_published_table2(bad)
    bad.write_text(edit)
    with pytest.raises(ValueError, match="source: missing"):
        load_published_table2(bad)


def _scores(rng, fams, n=7):
    rows = []
    for fam in fams:
        for i in range(n):
            wrong = int(rng.integers(0, 4))
            f1 = float(rng.uniform(0.5, 0.9))
            rows.append(dict(family=fam, instance=i, method="pc_kci", f1=f1, n_wrong_deletions=wrong, failed=False))
            rows.append(dict(family=fam, instance=i, method="oracle", f1=f1 + 0.04 * wrong, n_wrong_deletions=0, failed=False))
    return pd.DataFrame(rows)


def test_side_by_side_table_from_our_table2(tmp_path):
    rng = np.random.default_rng(3)
    fams = {"lg": {"kinds": {"linear": {}}}, "wild": {"kinds": {"mlp": {}}}, "seventh": {"kinds": {"abs": {}}}}
    scores = _scores(rng, fams)
    ours, _ = targets.table2(scores, fams, {"resamples": 100, "seed": 1, "level": 0.95})
    # the rule reads our Table 2 from its Parquet
    write_paper_table(ours, ours.astype(str), tmp_path / "table2", caption="t2", provenance={"stage": "test"})
    ours = pq.read_table(tmp_path / "table2.parquet").to_pandas()
    numbers, display = table2_vs_paper(ours, load_published_table2())
    # our families first (with `all` and a family the paper lacks), then published ones we did not run
    assert list(numbers["family"]) == ["lg", "wild", "seventh", "all", "anm", "hetero", "mixed", "gauntlet"]
    by = numbers.set_index("family")
    for fam in ["lg", "wild"]:
        pc = scores[(scores.family == fam) & (scores.method == "pc_kci")]
        orc = scores[(scores.family == fam) & (scores.method == "oracle")]
        assert by.loc[fam, "wrong_deletions_ours"] == pytest.approx(pc.n_wrong_deletions.mean())
        assert by.loc[fam, "share_none_ours"] == pytest.approx((pc.n_wrong_deletions == 0).mean())
        assert by.loc[fam, "oracle_gain_ours"] == pytest.approx(orc.f1.mean() - pc.f1.mean())
        w, s, g = PAPER[fam]
        assert (by.loc[fam, "wrong_deletions_paper"], by.loc[fam, "share_none_paper"],
                by.loc[fam, "oracle_gain_paper"]) == (w, s, g)
        assert by.loc[fam, "oracle_gain_diff"] == pytest.approx(by.loc[fam, "oracle_gain_ours"] - g)
        assert by.loc[fam, "n_instances"] == 7
    assert np.isnan(by.loc["seventh", "wrong_deletions_paper"]) and np.isnan(by.loc["anm", "wrong_deletions_ours"])
    row = display.set_index("family").loc["wild"]
    assert row["wrong deletions / instance: paper"] == "3.00" and row["instances with none: paper"] == "5%"
    assert row["oracle − PC-KCI (F1): ours − paper"].startswith(("+", "-"))
    assert display.set_index("family").loc["anm", "wrong deletions / instance: ours"] == "—"
    write_paper_table(numbers, display, tmp_path / "table2_paper", caption="cmp", provenance={"stage": "test"})
    assert "| wild |" in (tmp_path / "table2_paper.md").read_text()
    assert (tmp_path / "table2_paper.tex").read_text().startswith("\\begin{table}")
    with pytest.raises(ValueError, match="lacks columns"):
        table2_vs_paper(ours.drop(columns=["oracle_minus_pc_kci"]), load_published_table2())


def test_table2_paper_built_by_the_tiny_workflow(tiny_run):
    ours = pq.read_table(tiny_run / "results/tables/table2.parquet").to_pandas().set_index("family")
    cmp = pq.read_table(tiny_run / "results/tables/table2_paper.parquet").to_pandas().set_index("family")
    for fam in ours.index:
        assert cmp.loc[fam, "wrong_deletions_ours"] == pytest.approx(ours.loc[fam, "wrong_deletions_mean"])
        assert cmp.loc[fam, "oracle_gain_ours"] == pytest.approx(ours.loc[fam, "oracle_minus_pc_kci"])
    for fam, (w, _s, g) in PAPER.items():
        assert cmp.loc[fam, "wrong_deletions_paper"] == w and cmp.loc[fam, "oracle_gain_paper"] == g
    assert (tiny_run / "results/tables/table2_paper.md").read_text().count("\n") >= 8
