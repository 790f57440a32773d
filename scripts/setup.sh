#!/usr/bin/env bash
# Installs everything archbench needs on a Debian 12 machine, as root, idempotently.
# A second run only checks: every step is skipped when what it would produce is present.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
venv="$here/.venv"
stamp="$venv/.archbench-setup"

say() { printf '[setup] %s\n' "$*"; }
fail() { printf '[setup] FAILED: %s\n' "$*" >&2; exit 1; }

# --- Debian packages -------------------------------------------------------
debian_packages=(libopenmpi-dev openmpi-bin cmake g++ make dataset-fashion-mnist
                 openssh-server openssh-client iproute2 procps psmisc
                 munge slurmctld slurmd slurm-client)
missing=()
for pkg in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
# A fresh machine may lack a Python 3.11 with venv; Debian 12's python3 is 3.11.
python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys, venv, ensurepip; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
      python_bin="$(command -v "$candidate")"; break
    fi
  done
fi
[ -n "$python_bin" ] || missing+=(python3 python3-venv python3-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" -eq 0 ] || fail "Debian packages missing (${missing[*]}) and not root to install them"
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || fail "apt-get install ${missing[*]}"
fi
if [ -z "$python_bin" ]; then
  python_bin="$(command -v python3.11 || command -v python3)"
fi
"$python_bin" -c 'import sys; assert sys.version_info[:2] == (3, 11)' || fail "$python_bin is not Python 3.11"

# --- virtual environment ---------------------------------------------------
if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv with $python_bin"
  "$python_bin" -m venv "$venv" || fail "python -m venv"
fi
py="$venv/bin/python"
# Every install is held to the exact versions of the verified stack (constraints.txt; refresh it
# with scripts/refresh-constraints.sh), so a fresh machine next month builds the same stack.
constraints="$here/constraints.txt"
[ -f "$constraints" ] || fail "constraints.txt is missing from the checkout"
pip=("$py" -m pip --disable-pip-version-check -q)
pin=(-c "$constraints")

requirements_hash="$(cat scripts/setup.sh setup.cfg pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$requirements_hash" ] \
   && "$py" -c 'import horovod.tensorflow, archbench' 2>/dev/null; then
  say "environment up to date ($venv)"
  exit 0
fi

if ! "$py" -c 'import tensorflow as tf, numpy as np; assert tf.__version__ == "2.15.1"; assert np.__version__ < "2"' 2>/dev/null; then
  say "installing TensorFlow 2.15.1 (CPU) and numpy<2"
  "${pip[@]}" install "${pin[@]}" --upgrade pip setuptools wheel packaging || fail "pip upgrade"
  "${pip[@]}" install "${pin[@]}" 'tensorflow-cpu==2.15.1' 'numpy<2' || fail "pip install tensorflow-cpu==2.15.1"
fi

# scikit-learn and statsmodels: their bundled data sets (UCI tables, time series) feed the
# examples of bringing one's own data and their tests; nothing is downloaded.
say "installing Python libraries"
"${pip[@]}" install "${pin[@]}" 'numpy<2' mpi4py pandas matplotlib pyyaml pytest pytest-timeout ruff scipy pymetis \
  scikit-learn statsmodels \
  || fail "pip install of the Python libraries"

# Horovod is built from source against the TensorFlow above; skip when the built one matches.
horovod_ok() {
  "$py" - <<'PY' 2>/dev/null
import horovod, horovod.tensorflow as hvd
assert horovod.__version__ == "0.28.1"
assert hvd.mpi_built() and hvd.gloo_built()
PY
}
if ! horovod_ok; then
  say "building Horovod 0.28.1 with TensorFlow, MPI and Gloo (several minutes)"
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
  MAKEFLAGS="-j$(nproc)" \
    "${pip[@]}" install "${pin[@]}" --no-build-isolation 'horovod==0.28.1' || fail "building Horovod 0.28.1"
  horovod_ok || fail "Horovod built without TensorFlow, MPI or Gloo support"
fi

# `source .venv/bin/activate` then gives users what mpirun/horovodrun need as root.
if ! grep -q 'archbench: launcher environment' "$venv/bin/activate"; then
  cat >> "$venv/bin/activate" <<'ACTIVATE'
# archbench: launcher environment
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
ACTIVATE
fi

say "installing archbench (editable)"
"${pip[@]}" install --no-deps --no-build-isolation -e . || fail "pip install -e ."
"$py" -c 'import tensorflow, horovod.tensorflow, mpi4py, archbench' || fail "import check"
echo "$requirements_hash" > "$stamp"
say "done"
