#!/usr/bin/env bash
# Regenerate requirements/lock.txt from an environment in which the tests passed:
#   bash requirements/compile.sh /path/to/venv
# The versions are exactly those installed there (what `pip install -e ".[test,cluster]"` resolved);
# uv adds the hashes of every file of each pinned release.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:?usage: bash requirements/compile.sh VENV}
pins=requirements/.tested.txt
"$venv/bin/python" -m pip freeze --exclude-editable | grep -v '^heuresis' > "$pins"
command -v uv >/dev/null || { echo "uv is needed: python3 -m pip install uv" >&2; exit 1; }
uv pip compile pyproject.toml --extra test --extra cluster --constraint "$pins" \
    --python-version 3.11 --python-platform x86_64-manylinux_2_28 --generate-hashes \
    --custom-compile-command "bash requirements/compile.sh VENV" -o requirements/lock.txt
rm -f "$pins"
