# cli_common.bash - helpers sourced by the tests/cli_*.sh scripts (not a test itself).
#
#   source "$(dirname "$0")/cli_common.bash"
#   expect 2 "$SAGA_BIN" info --bogus      # runs it, checks the exit code; output in $OUT, $ERR
#   expect_err "unknown option '--bogus'"
#   finish

: "${SAGA_BIN:?SAGA_BIN must name the saga binary}"
if [ ! -x "$SAGA_BIN" ]; then
    echo "FAIL: no saga binary at $SAGA_BIN (build the saga_cli target)" >&2
    exit 1
fi
# The commands' default device: the CPU, so that this suite checks the CPU path wherever it runs
# (the GPU has its own tests, label gpu); SAGA_DEVICE=auto (or cuda) runs it on a GPU instead.
export SAGA_DEVICE=${SAGA_DEVICE:-cpu}
# Under AddressSanitizer a leak or a bad access must not pass for an expected exit code 1.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=86
export UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}exitcode=86:print_stacktrace=1
TMP=${SAGA_TEST_TMP:-$(mktemp -d)}
rm -rf "$TMP"
mkdir -p "$TMP"
OUT=$TMP/stdout
ERR=$TMP/stderr
FAILS=0
RC=0

fail() {
    echo "FAIL: $*" >&2
    FAILS=$((FAILS + 1))
}

# Runs a command, keeping its exit code in RC and its output in $OUT and $ERR.
run() {
    set +e
    "$@" >"$OUT" 2>"$ERR"
    RC=$?
    set -e
}

# expect CODE CMD...: runs CMD and checks its exit code.
expect() {
    local want=$1
    shift
    run "$@"
    if [ "$RC" -ne "$want" ]; then
        fail "'$*' exited $RC, expected $want"
        sed 's/^/  stderr: /' "$ERR" | head -5 >&2
    elif grep -q 'Sanitizer' "$ERR"; then
        fail "'$*' tripped a sanitizer"
        sed 's/^/  stderr: /' "$ERR" | head -20 >&2
    fi
}

expect_err() {
    grep -qF -- "$1" "$ERR" || { fail "stderr lacks '$1':"; sed 's/^/  stderr: /' "$ERR" | head -5 >&2; }
}

expect_out() {
    grep -qF -- "$1" "$OUT" || fail "stdout lacks '$1'"
}

# The last line of stdout, which --json makes one JSON object.
json_last() {
    tail -n 1 "$OUT"
}

# json_get EXPR: evaluates a python expression on the JSON object `j` of the last stdout line.
json_get() {
    json_last | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print('"$1"')'
}

# dataset VAR FILE: sets VAR to the path of a dataset file, or ends the test as skipped when it
# is missing (as failed under CI=true).
dataset() {
    local dir=${SAGA_DATA_DIR:-${SAGA_DEFAULT_DATA_DIR:-}}
    local p=$dir/$2
    if [ -z "$dir" ] || [ ! -f "$p" ]; then
        if [ "${CI:-}" = true ]; then
            echo "FAIL: dataset $p is missing (set SAGA_DATA_DIR)" >&2
            exit 1
        fi
        echo "skipped: dataset $p is missing (set SAGA_DATA_DIR)"
        exit 0
    fi
    printf -v "$1" '%s' "$p"
}

finish() {
    if [ "$FAILS" -ne 0 ]; then
        echo "$FAILS check(s) failed" >&2
        exit 1
    fi
    echo "all checks passed"
}
