#!/usr/bin/env bash
# tpurank entry point.
#   ./run.sh all              the whole pipeline: data, prepare, features, train, validate, submission
#   ./run.sh test             lint and the test suite
#   ./run.sh setup            create or refresh .venv (idempotent; every other command runs it first)
#   ./run.sh <stage> [args]   python -m tpurank <stage> [args]   (./run.sh --help lists the stages)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

VENV=.venv
PY="${TPURANK_PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

# uv installs the pinned requirements in about half of pip's time (parallel unpacking and bytecode
# compilation: docs/usage.md); pip does it where uv cannot be installed or fails, or when
# TPURANK_INSTALLER=pip
UV_PIN="uv==0.13.8"

pip_sources() {
  # pip's configured sources (pip.conf, PIP_* variables) as uv's options, one per line: uv reads no
  # pip configuration, and a machine whose pip uses a mirror or local wheels must install the same.
  # `pip config list` lists the variables first (they win, as in pip) and prints a value of several
  # lines with `\n` between them
  local index=""
  "$VENV/bin/python" -m pip config list 2>/dev/null | while IFS='=' read -r key value; do
    value=${value#\'}; value=${value%\'}; value=${value//\\n/ }
    case "${key##*.}" in
      index-url) if [[ -z "$index" ]]; then index=$value; echo "--index-url"; echo "$value"; fi ;;
      extra-index-url) for v in $value; do echo "--extra-index-url"; echo "$v"; done ;;
      find-links) for v in $value; do echo "--find-links"; echo "$v"; done ;;
      constraint) for v in $value; do echo "--constraint"; echo "$v"; done ;;
      no-index) if [[ "$value" =~ ^(1|[Tt]rue|[Yy]es|[Oo]n)$ ]]; then echo "--no-index"; fi ;;
    esac
  done
  return 0
}

install_with_uv() {
  "$VENV/bin/python" -m pip install -qq --disable-pip-version-check "$UV_PIN" || return 1
  local sources=()
  mapfile -t sources < <(pip_sources)
  # unsafe-best-match: the best version across every source, as pip picks it
  UV_LINK_MODE=copy "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --compile-bytecode \
    --index-strategy unsafe-best-match "${sources[@]}" -r requirements.txt || return 1
  UV_LINK_MODE=copy "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps \
    --no-build-isolation "${sources[@]}" -e .
}

install_with_pip() {
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements.txt
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
}

setup() {
  local installer="${TPURANK_INSTALLER:-uv}"
  if [[ "$installer" != uv && "$installer" != pip ]]; then
    echo "run.sh: error: \$TPURANK_INSTALLER must be uv or pip, got '$installer'" >&2
    exit 2
  fi
  local stamp="$VENV/.tpurank-installed"
  local want
  want=$(cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    return 0
  fi
  if [[ ! -x "$VENV/bin/python" ]]; then
    echo "[setup] creating $VENV with $("$PY" --version)" >&2
    "$PY" -m venv "$VENV"
  fi
  echo "[setup] installing requirements into $VENV (first run only)" >&2
  if [[ "$installer" == pip ]]; then
    install_with_pip
  elif ! install_with_uv; then
    echo "[setup] uv could not install them: installing with pip" >&2
    install_with_pip
  fi
  echo "$want" > "$stamp"
}

cmd="${1:-help}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
  setup)
    setup ;;
  test)
    setup
    "$VENV/bin/ruff" check src tests bench notebooks
    "$VENV/bin/ruff" format --check --quiet src tests bench notebooks
    workers=$("$VENV/bin/python" -c "import os; print(max(1, min(4, os.cpu_count() or 1)))")
    # one pytest worker per core, each single-threaded: oversubscribed BLAS/OpenMP threads make
    # small torch and LightGBM jobs many times slower; a passed test's tmp_path is deleted as it
    # ends (on a RAM disk where there is one, tests/conftest.py), not kept for three runs; bytecode
    # cached (in the ignored __pycache__ folders) even where PYTHONDONTWRITEBYTECODE is set, or each
    # worker rewrites every test module's assertions again: half of the suite's collection
    exec env -u PYTHONDONTWRITEBYTECODE OMP_NUM_THREADS=1 "$VENV/bin/python" -m pytest -q -n "$workers" \
      -o tmp_path_retention_policy=failed "$@" ;;
  help|-h|--help)
    setup
    exec "$VENV/bin/python" -m tpurank --help ;;
  *)
    setup
    exec "$VENV/bin/python" -m tpurank "$cmd" "$@" ;;
esac
