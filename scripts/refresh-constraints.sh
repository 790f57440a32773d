#!/usr/bin/env bash
# Rewrites constraints.txt from the packages of .venv, after an upgrade has been verified there
# (make test passes): the exact versions scripts/setup.sh then installs on every machine.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-$here/.venv/bin/python}"
{
  echo "# The verified stack: exact versions scripts/setup.sh installs (pip install -c)."
  echo "# Refresh with scripts/refresh-constraints.sh after make test passes on an upgraded .venv."
  # archbench itself is installed editable from the checkout, so it is not pinned here.
  "$py" -m pip freeze --all --exclude-editable --disable-pip-version-check \
    | grep -v -i -E '^(archbench)([=@ ]|$)' | LC_ALL=C sort -f
} > "$here/constraints.txt"
echo "wrote $here/constraints.txt ($(grep -c '==' "$here/constraints.txt") packages)"
