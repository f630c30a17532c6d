# Stage 2, reference sweeps (docs/design.md §4.1-4.2): every menu algorithm and baseline on every shard of
# instances, one Parquet per algorithm, family, split and shard. PC variants also write their
# deletion log with the hidden wrong/right label. Algorithms of one batch
# (config: references.batches) share a job; each batch is its own rule, references_<k>.

for _k, _batch in enumerate(REFERENCE_BATCHES):

    rule:
        name:
            f"references_{_k}"
        input:
            data="results/instances/{family}/{split}",
            truth="results/truth/{family}/{split}/graphs.parquet",
        output:
            **{
                a: f"results/references/{a}/{{family}}/{{split}}/shard-{{shard}}.parquet"
                for a in _batch
            },
        log:
            f"logs/references/batch{_k}/{{family}}/{{split}}/shard-{{shard}}.log",
        benchmark:
            f"results/benchmarks/references/batch{_k}/{{family}}/{{split}}/shard-{{shard}}.tsv"
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
