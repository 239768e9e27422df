#!/usr/bin/env bash
# The Python package's tests (python/tests, pytest) against the package assembled in the build tree
# (<build>/python/saga: the module built with this build's libsaga) and this build's `saga`
# command. Skipped (77) when the module was not built or numpy / pytest are missing, except in CI
# (CI=true), where that fails. In the AddressSanitizer build the module is instrumented but the
# interpreter is not: the sanitizer runtimes are preloaded, and leak checking is left off (the
# interpreter keeps memory until exit; the C tests check saga's own leaks).
set -euo pipefail
py=${SAGA_PYTHON:-}
skip() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $*" >&2
        exit 1
    fi
    echo "skipping the Python tests: $*"
    exit 77
}
[ -n "$py" ] && [ -d "$SAGA_PY_DIR/saga" ] ||
    skip "the Python module was not built (Debian: apt-get install python3-dev; SAGA_PYTHON=ON)"
"$py" -c 'import numpy, pytest' 2>/dev/null ||
    skip "$py lacks numpy or pytest (Debian: apt-get install python3-numpy python3-pytest)"
if [ "${SAGA_SANITIZE:-OFF}" = ON ]; then
    preload=""
    for rt in libasan.so libubsan.so; do
        f=$("${SAGA_CC:-cc}" -print-file-name="$rt")
        [ -f "$f" ] || skip "the sanitizer runtime $rt was not found beside ${SAGA_CC:-cc}"
        preload="$preload $f"
    done
    export LD_PRELOAD="${preload# }" ASAN_OPTIONS=detect_leaks=0
fi
export PYTHONPATH="$SAGA_PY_DIR${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export SAGA_DATA_DIR=${SAGA_DATA_DIR:-$SAGA_DEFAULT_DATA_DIR}
cd "$SAGA_PY_DIR"
exec "$py" -m pytest -q -p no:cacheprovider "$SAGA_SRC_DIR/python/tests"
