#!/usr/bin/env bash
# Regenerate the lock files from an environment in which the tests passed:
#   bash requirements/compile.sh /path/to/venv
# requirements/lock.txt: the versions exactly as installed there (what `pip install -e ".[test,cluster]"`
# resolved); uv adds the hashes of every file of each pinned release.
# requirements/inspect-lock.txt: the same with the inspect extra, whose inspect_ai needs older fsspec
# and botocore (its own environment; docs/agents.md, "From inspect_ai"): every other version as in lock.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: bash requirements/compile.sh VENV}
pins=requirements/.tested.txt
"$venv/bin/python" -m pip freeze --exclude-editable | grep -v '^heuresis' > "$pins"
command -v uv >/dev/null || { echo "uv is needed: python3 -m pip install uv" >&2; exit 1; }
compile() {
    uv pip compile pyproject.toml --extra test --extra cluster "$@" \
        --python-version 3.11 --python-platform x86_64-manylinux_2_28 --generate-hashes \
        --custom-compile-command "bash requirements/compile.sh VENV"
}
compile --constraint "$pins" -o requirements/lock.txt
grep -viE '^(fsspec|boto3|botocore|s3transfer)==' "$pins" > "$pins.inspect"
compile --extra inspect --constraint "$pins.inspect" -o requirements/inspect-lock.txt
rm -f "$pins" "$pins.inspect"
