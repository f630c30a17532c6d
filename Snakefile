# Heuresis: the benchmark workflow. Stages are one rule file each under rules/; all logic is in
# the heuresis package (src/heuresis); rules and workflow/scripts are thin adapters.
#
#   snakemake all --cores 32                                   # paper scale (config/config.yaml)
#   snakemake all --cores 2 --configfile config/quick.yaml     # small run, minutes on a laptop

configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/instances.smk"
include: "rules/references.smk"
include: "rules/headroom.smk"
include: "rules/targets.smk"
include: "rules/verification.smk"
include: "rules/episodes.smk"
include: "rules/leakage.smk"
include: "rules/networks.smk"
include: "rules/repairs.smk"
include: "rules/analysis.smk"
include: "rules/games.smk"


rule all:
    input:
        all_targets(),
    default_target: True
