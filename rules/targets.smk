# The paper's tables and figures: one rule per target of the registry (heuresis.targets.registry), named
# after it, generated here in one loop; each reads its inputs and config slice by name (WorkflowPlan.target_inputs,
# target_params: heuresis.preflight.plan) and is built by workflow/scripts/target.py. Its caption is its file under
# workflow/report/, the only one it has: the report shows it and the table's files carry it.

for _t in PAPER_TARGETS:

    rule:
        name:
            _t.name
        input:
            **target_inputs(_t),
        output:
            **target_outputs(_t),
        log:
            log_of(next(iter(target_files(_t).values()))),
        params:
            target=_t.name,
            caption=target_caption(_t),
            **target_params(_t),
        group:
            _t.group or None
        threads: 1
        resources:
            mem_mb=_t.mem_mb,
            runtime=_t.runtime,
        conda:
            "../environment.yml"
        script:
            "../workflow/scripts/target.py"
