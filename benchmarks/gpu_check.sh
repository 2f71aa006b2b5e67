#!/usr/bin/env bash
# The CuPy backend on a GPU machine, in one go and without network (docs/gpu.md):
#   1. the backend's own tests (tests/test_cupy_backend.py: the GPU-only ones run here);
#   2. section 8 conformance of every layer step and network, in every declared dtype,
#      with the quick section 9 benchmark and the evaluation (one pytest session per dtype);
#   3. where the time goes, per layer type and step (benchmarks/profile_gpu.py);
#   4. the same-process comparison with PyTorch + cuDNN (benchmarks/compare_torch_gpu.py).
# Needs, already installed: this checkout (pip install -e .), CuPy with the CUDA libraries
# (pip install 'cupy-cuda12x[ctk]'), PyTorch with CUDA for steps 3 and 4. Every step has its
# own timeout (480 s in all: under 8 minutes) and a failed step does not stop the others.
# On an H200 (docs/gpu.md) the steps before the comparison took 2, 24, 19, 16, 7, 9 and 9 s;
# the comparison, which writes its rows as they finish, smallest networks first, had 24 of
# its 30 rows after 190 s: it gets the rest of the 480 s (COMPARE_SECONDS, default 255).
# Logs, the pytest JSON reports and summary.json go to $OUT (default ./gpu_check_out).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-./gpu_check_out}"
PYTHON="${PYTHON:-python}"
BACKEND="pytest_gostcnn.backends.cupy:CupyBackend"
mkdir -p "$OUT"
declare -A STATUS

step() {  # step NAME SECONDS COMMAND...: run with a timeout, log, remember the exit code
    local name=$1 seconds=$2
    shift 2
    echo "== $name (timeout ${seconds}s): $*"
    local start=$SECONDS
    timeout --kill-after=10 "$seconds" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    STATUS[$name]="$rc $((SECONDS - start))"
    echo "   exit $rc after $((SECONDS - start)) s; tail of $OUT/$name.log:"
    tail -n 5 "$OUT/$name.log" | sed 's/^/   | /'
}

step environment 20 bash -c "nvidia-smi; $PYTHON - <<'PY'
from pytest_gostcnn.backends.cupy import CupyBackend
reason = CupyBackend.unavailable_reason()
print('unavailable:', reason)
if reason is None:
    backend = CupyBackend('float32')
    print(backend.device(), backend.system())
    for dtype in ('float32', 'tf32', 'float16', 'bfloat16'):
        peak = CupyBackend(dtype).peak()
        print(dtype, peak.describe() if peak else 'peak unknown')
PY"

step unit-tests 45 "$PYTHON" -m pytest tests/test_cupy_backend.py tests/test_peak.py -q -rs

# float32 and float16 in both modes; tf32 and bfloat16 are inference types (docs/standard.md §8).
# float16 networks are expected to fail: section 8's values exceed float16 (docs/gpu.md).
for dtype in float32 float16 tf32 bfloat16; do
    mode=both seconds=40
    case $dtype in tf32|bfloat16) mode=inference seconds=25 ;; esac
    step "conformance-$dtype" "$seconds" "$PYTHON" -m pytest --gost-backend="$BACKEND" \
        --gost-dtype="$dtype" --gost-mode="$mode" --gost-report="$OUT/report-$dtype.json" -q -rfs
done

step profile 30 "$PYTHON" benchmarks/profile_gpu.py --networks M,Sh,S,R --batch 64 --json "$OUT/profile_gpu.json"

step compare-torch "${COMPARE_SECONDS:-255}" "$PYTHON" benchmarks/compare_torch_gpu.py --json "$OUT/compare_torch_gpu.json"

"$PYTHON" - "$OUT" <<PY
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
steps = {}
for entry in """$(for k in "${!STATUS[@]}"; do echo "$k ${STATUS[$k]}"; done)""".split("\n"):
    if entry.strip():
        name, rc, seconds = entry.split()
        steps[name] = {"exit": int(rc), "seconds": int(seconds), "log": f"{name}.log"}
summary = {"steps": steps}
comparison = out / "compare_torch_gpu.json"
if comparison.exists():
    summary["compare_torch_gpu"] = json.loads(comparison.read_text())
(out / "summary.json").write_text(json.dumps(summary, indent=2))
print(json.dumps(steps, indent=2))
PY
