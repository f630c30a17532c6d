# Instrument verification (docs/design.md §8): one job per check against its independent truth, then
# Table 5. The sizes come from config `verification.scales[verification.scale]` (small in CI,
# large on a cluster); each job's params are only its check's slice of the config.


rule verification_check:
    output:
        record=P.VERIFICATION_CHECK,
        examples=directory(P.VERIFICATION_EXAMPLES),
    log:
        log_of(P.VERIFICATION_CHECK),
    benchmark:
        benchmark_of(P.VERIFICATION_CHECK)
    params:
        settings=verification_settings,
    wildcard_constraints:
        check=one_of(VERIFICATION_CHECKS),
    threads: verification_threads
    resources:
        mem_mb=verification_mem_mb,
        runtime=verification_runtime,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/verification.py"
