#!/usr/bin/env bash
# The one script for the lent GPU machine (run from the repository root): installs this
# checkout without dependencies (nothing can be downloaded there), runs the tests marked `gpu`
# (each gradient-check row on the GPU and CPU/GPU comparisons), then bench/bench_gpu.py.
# Logs go to $OUT (or ./gpu_check_out): tests.log (one line a test), failures.log (each
# failure's traceback as it happens, so a run stopped at its limit keeps them), bench.log.
# Limits: TEST_SECONDS (default 240) for the tests, BENCH_SECONDS (150) for the benchmark;
# PER_TEST_SECONDS (180) for one test where pytest-timeout is installed; WORKERS (default 12)
# pytest-xdist processes where pytest-xdist is installed; BENCH_ARGS more arguments to it;
# DEVICE_PROFILE_LINES (15) kernels listed per contender by the benchmark's CUPTI profile
# (--device-profile: GPU busy time against wall time, and where the GPU time goes; 0: none).
# Exit status: the tests' status, else the benchmark's.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
LOGS=${OUT:-$PWD/gpu_check_out}
mkdir -p "$LOGS"
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null) | $(nproc) cores"
$PY -c "import cupy, numpy, torch; print('cupy', cupy.__version__, '| numpy', numpy.__version__, '| torch', torch.__version__, '| cuda devices', cupy.cuda.runtime.getDeviceCount())"
$PY -c "import numba; print('numba', numba.__version__)" || true
$PY -m pip install --no-deps --no-build-isolation -q -e . >/dev/null 2>&1 || echo "pip install -e . failed; using PYTHONPATH"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export SCULLER_FAILURE_LOG=$LOGS/failures.log
PARALLEL=()
if $PY -c "import xdist" 2>/dev/null; then PARALLEL=(-n "${WORKERS:-12}"); fi
TIMEOUT=()
if $PY -c "import pytest_timeout" 2>/dev/null; then TIMEOUT=(--timeout "${PER_TEST_SECONDS:-180}"); fi
echo "== pytest -m gpu ${PARALLEL[*]} ${TIMEOUT[*]}"
start=$SECONDS
timeout "${TEST_SECONDS:-240}" $PY -m pytest -m gpu "${PARALLEL[@]}" "${TIMEOUT[@]}" -v --tb=short \
    -p no:cacheprovider -rfE tests ${TESTS_ARGS:-} > "$LOGS/tests.log" 2>&1
tests=$?
grep -E "PASSED|FAILED|ERROR|SKIPPED" "$LOGS/tests.log" | grep -c PASSED | sed 's/^/passed: /'
grep -E "^\[gw[0-9]+\] .*(FAILED|ERROR)|^(FAILED|ERROR) " "$LOGS/tests.log" | sed 's/^\[gw[0-9]*\] \[ *[0-9]*%\] //' | sort | uniq | head -150
tail -3 "$LOGS/tests.log"
echo "== pytest -m gpu: exit $tests after $((SECONDS - start)) s (124: stopped at ${TEST_SECONDS:-240} s)"
echo "== bench/bench_gpu.py"
start=$SECONDS
timeout "${BENCH_SECONDS:-150}" $PY bench/bench_gpu.py --rounds 3 \
    --device-profile "${DEVICE_PROFILE_LINES:-15}" ${BENCH_ARGS:-} 2>&1 | tee "$LOGS/bench.log"
bench=${PIPESTATUS[0]}
echo "== bench_gpu: exit $bench after $((SECONDS - start)) s (124: stopped at ${BENCH_SECONDS:-150} s)"
timeout 60 $PY bench/gpu_overheads.py
if [ "$tests" -ne 0 ]; then exit "$tests"; fi
exit "$bench"
