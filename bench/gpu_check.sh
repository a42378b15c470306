#!/usr/bin/env bash
# The one script for the lent GPU machine (run from the repository root): installs this
# checkout without dependencies (nothing can be downloaded there), runs the tests marked `gpu`
# (each gradient-check row on the GPU and CPU/GPU comparisons), then bench/bench_gpu.py.
# Time limits keep the whole run well under 8 minutes: tests 300 s, benchmark 150 s.
# Exit status: the tests' status, else the benchmark's.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
echo "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
$PY -c "import cupy, torch; print('cupy', cupy.__version__, '| torch', torch.__version__, '| cuda devices', cupy.cuda.runtime.getDeviceCount())"
$PY -m pip install --no-deps --no-build-isolation -q -e . || echo "pip install -e . failed; using PYTHONPATH"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
echo "== pytest -m gpu"
start=$SECONDS
timeout 300 $PY -m pytest -m gpu -x -q -p no:cacheprovider -rfE tests
tests=$?
echo "== pytest -m gpu: exit $tests after $((SECONDS - start)) s (124: stopped at 300 s)"
echo "== bench/bench_gpu.py"
start=$SECONDS
timeout 150 $PY bench/bench_gpu.py --rounds 3
bench=$?
echo "== bench_gpu: exit $bench after $((SECONDS - start)) s (124: stopped at 150 s)"
if [ "$tests" -ne 0 ]; then exit "$tests"; fi
exit "$bench"
