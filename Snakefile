# Heuresis: the benchmark workflow. Stages are one rule file each under rules/; all logic is in
# the heuresis package (src/heuresis); rules and workflow/scripts are thin adapters.
#
#   snakemake all --cores 32                                   # paper scale (config/config.yaml)
#   snakemake all --cores 2 --configfile config/quick.yaml     # small run, minutes on a laptop

from snakemake.utils import min_version

min_version("9.0")  # the range pyproject.toml and environment.yml declare: snakemake>=9.0,<10


configfile: "config/config.yaml"


# `snakemake --report report.html` after a run: this page, then every table and figure with its
# caption (workflow/report/<target>.rst), by category.
report: "workflow/report/workflow.rst"


include: "rules/common.smk"
include: "rules/instances.smk"
include: "rules/references.smk"
include: "rules/headroom.smk"
include: "rules/targets.smk"
include: "rules/verification.smk"
include: "rules/episodes.smk"
include: "rules/pilot.smk"
include: "rules/leakage.smk"
include: "rules/saturation.smk"
include: "rules/repairs.smk"
include: "rules/analysis.smk"
include: "rules/games.smk"
include: "rules/view.smk"


rule all:
    input:
        all_targets(),
    default_target: True
