# The static export of the viewer (docs/viewer.md): every episode and game play of the run as web
# pages under results/view, the same pages `heuresis view` serves. Not part of `all`: it reads every
# output (so any change rebuilds the whole folder), writes one page per episode (thousands at paper
# scale) and holds the hidden truth; ask for it: `snakemake view`.


rule view:
    input:
        all_targets(),
    output:
        site=directory(P.VIEW),
    log:
        log_of(P.VIEW),
    params:
        results=site_results_folder,   # the results folder the site is in
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/view.py"
