#!/usr/bin/env bash
# `pip install .` as a user runs it on a fresh clone: the files git tracks (and new ones it does not
# ignore) are copied to a scratch directory, built by pip with scikit-build-core (from PyPI) into a
# virtual environment that sees the system's numpy and pytest, imported from elsewhere, and tested
# with python/tests against the `saga` command the wheel installed. Then a C program is built
# against the library inside the installed package (pkg-config) and checked to load that same
# libsaga as the Python module. Skipped (77) without network or the Python tools, except in CI.
set -euo pipefail
src=$1 work=$2 py=${3:-python3}
skip() {
    if [ "${CI:-}" = true ]; then
        echo "FAIL: $*" >&2
        exit 1
    fi
    echo "skipping the pip install test: $*"
    exit 77
}
"$py" -c 'import venv, numpy, pytest' 2>/dev/null ||
    skip "$py lacks venv, numpy or pytest (Debian: python3-venv python3-numpy python3-pytest)"
rm -rf "$work"
mkdir -p "$work/src"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$src" ls-files -z -c -o --exclude-standard |
        (cd "$src" && xargs -0 cp -p --parents -t "$work/src")
else
    (cd "$src" && tar --exclude='./build*' -cf - .) | tar -C "$work/src" -pxf -
fi
"$py" -m venv --system-site-packages "$work/venv"
pip=("$work/venv/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" download --no-deps -d "$work/probe" scikit-build-core >/dev/null 2>&1 ||
    skip "PyPI cannot be reached (pip needs scikit-build-core from it)"
command -v ccache >/dev/null && export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
# pip's build directory outlives the test, and the copy keeps the files' times, so that a second
# run rebuilds only what changed (a first one builds all of saga: a minute or more)
export SKBUILD_BUILD_DIR="$work-build"
# The CUDA module's build is checked by the project's own build; here nvcc would only add minutes
# to the packaging check, so it is left out unless SAGA_PIP_CUDA=1 (a user's `pip install .`
# builds it wherever nvcc is found).
settings=()
[ "${SAGA_PIP_CUDA:-0}" = 1 ] || settings=(--config-settings=cmake.define.SAGA_CUDA=OFF)
t0=$(date +%s)
"${pip[@]}" install -q "${settings[@]}" "$work/src"
echo "pip install: $(( $(date +%s) - t0 )) s"

cd "$work" # not the source tree: `import saga` must find the installed package
vpy="$work/venv/bin/python"
pkg=$("$vpy" -c 'import saga, os; print(os.path.dirname(saga.__file__))')
case $pkg in "$work/venv/"*) ;; *) echo "FAIL: saga imported from $pkg" >&2; exit 1 ;; esac
"$vpy" -c 'import saga; g = saga.Graph.from_edge_index([[0, 1, 2], [1, 2, 0]]); print("import:", g)'
SAGA_BIN="$pkg/bin/saga" SAGA_DATA_DIR=${SAGA_DATA_DIR:-${SAGA_DEFAULT_DATA_DIR:-}} \
    OMP_NUM_THREADS=2 "$vpy" -m pytest -q -p no:cacheprovider "$src/python/tests"

# a C program and the Python package share the installed library
pc=$("$vpy" -c 'import saga; print(saga.pkgconfig_dir())')
# shellcheck disable=SC2046 # word splitting of the flag lists is intended
cc -std=c11 $(PKG_CONFIG_PATH="$pc" pkg-config --cflags saga) "$src/examples/hello/hello.c" \
    -o "$work/hello" $(PKG_CONFIG_PATH="$pc" pkg-config --libs saga) -Wl,-rpath,"$pkg/lib"
printf '0 1\n1 2\n2 0\n2 3\n' >"$work/tiny.txt"
"$work/hello" "$work/tiny.txt" | grep '4 vertices, 4 edges'
c_lib=$(ldd "$work/hello" | awk '/libsaga\.so/ { print $3 }')
py_lib=$(ldd "$pkg"/_saga*.so | awk '/libsaga\.so/ { print $3 }')
echo "C program: $c_lib; Python module: $py_lib"
[ -n "$c_lib" ] && [ "$(readlink -f "$c_lib")" = "$(readlink -f "$py_lib")" ]
