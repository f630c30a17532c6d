# Shared helpers: config validation at workflow start, wildcard constraints, target lists.
# Helpers live here, not as lambdas inside rules.

try:
    from heuresis.config import ConfigError, SPLITS, validate_config
    from heuresis import instances as _instances
except ImportError as exc:  # the package must be installed (README: pip install -e .)
    raise WorkflowError(
        f"cannot import the heuresis package ({exc}); install it first: pip install -e ."
    )

try:
    config.update(validate_config(config))
except ConfigError as exc:
    raise WorkflowError(str(exc))

FAMILIES = list(config["families"])


wildcard_constraints:
    family="|".join(FAMILIES),
    split="|".join(SPLITS),


def n_instances(wildcards):
    """Instances of a split (config: instances.n_dev / instances.n_test)."""
    return int(config["instances"][f"n_{wildcards.split}"])


def instance_params(wildcards):
    """The config slice a family's instances depend on; a change elsewhere reruns nothing here."""
    return _instances.instance_spec(config, wildcards.family)


def instance_outputs():
    return expand(
        [
            "results/instances/{family}/{split}",
            "results/truth/{family}/{split}/graphs.parquet",
            "results/truth/{family}/{split}/nodes.parquet",
        ],
        family=FAMILIES,
        split=SPLITS,
    )


def all_targets():
    """Every final target of the workflow (stages add theirs here as they land)."""
    return instance_outputs()
