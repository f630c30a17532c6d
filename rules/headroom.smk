# Stage 3, headroom (docs/design.md §4.3): BCA_g and BCA_f on dev; oracle, floors and every reference
# scored on test, per instance.


rule headroom:
    input:
        refs=reference_outputs(),
        truth=test_truth(),
    output:
        selection=P.HEADROOM_SELECTION,
        scores=P.HEADROOM_SCORES,
    log:
        log_of(P.HEADROOM_SELECTION),
    params:
        headroom=headroom_params(),
        families=FAMILIES,
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/headroom.py"
