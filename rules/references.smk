# Stage 2, reference sweeps (docs/design.md §4.1-4.2): every menu algorithm and baseline on every shard of
# instances, one Parquet per algorithm, family, split and shard. PC variants also write their
# deletion log with the hidden wrong/right label. Algorithms of one batch
# (config: references.batches) share a job; each batch is its own rule, named after its first
# algorithm: references_<algorithm> (e.g. references_pc_fisherz), whatever the batch's position.

for _first, _batch in REFERENCE_BATCHES.items():

    rule:
        name:
            f"references_{_first}"
        input:
            data=P.INSTANCES,
            truth=P.TRUTH_GRAPHS,
        output:
            **{
                a: reference_template(a)
                for a in _batch
            },
        log:
            log_of(reference_template(_first)),
        benchmark:
            benchmark_of(reference_template(_first))
        params:
            algorithms={a: algorithm_params(a) for a in _batch},
            indices=reference_indices,
            grades=config["grades"],
        threads: 1
        resources:
            mem_mb=3000,
            runtime=reference_runtime(_batch),
        conda:
            "../environment.yml"
        script:
            "../workflow/scripts/references.py"
