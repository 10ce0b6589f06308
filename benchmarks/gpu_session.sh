#!/usr/bin/env bash
# One session's GPU checks (docs/gpu.md, "Still unmeasured on a GPU"): run from the project root on a GPU machine,
# after ../shared/gpu/README.md's set-up (wheels in .whl/; this script installs them into /tmp/site when present).
# Each step is bounded by `timeout` and prints what docs/gpu.md needs; together about 9.5 minutes, in priority order,
# so a session of 15 device minutes (the machine's start takes some) gets the first steps even if the last is cut.
# Everything it prints is also kept under ${OUT:-/tmp/gpu-session} (logs, the doctor's JSON line, the grid's timing).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpu-session}
mkdir -p "$OUT"
if [ -d .whl ] && [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
fi
[ -d /tmp/site ] && export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export PYTHONPATH=${PYTHONPATH:-$PWD}
step() { echo; echo "=== $1 ($(date -u +%H:%M:%S))"; }

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.csv"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())"

# 1. the roofline floor: N = 15, 30, 100 against conv (TF32) / GEMM (IEEE) / copy rates, each part printed; target 2x
step "cfl doctor --gpu --checks env speed plan"
timeout 180 python3 -m cflcore.cli doctor --gpu --checks env speed plan 2>&1 | tee "$OUT/doctor.txt"

# 2. issue 71's settings: the same bytes in two processes with each (conv_form loop / unfold, fc_tf32, kept state on
#    vmap), and each conv form equal to the loop trainer in float64
step "GPU tests of the new settings"
CFL_REQUIRE_GPU=1 timeout 120 python3 -m pytest -p no:cacheprovider -n 0 -q -rs tests/fl/test_gpu.py \
    -k "new_setting or conv_forms" 2>&1 | tee "$OUT/gpu_tests.txt" | tail -15

# 3. which conv form is fastest (and deterministic) for 000's CNN at N = 15
step "benchmarks/conv_forms.py"
timeout 60 python3 benchmarks/conv_forms.py --device cuda --models ocfl-cnn --clients 15 --repeats 2 \
    --csv "$OUT/conv_forms.csv" 2>&1 | tail -4

# 4. ResNet34 (config/paper.yaml's CIFAR-10 recipe: 3x32x32, batch 64, 3 epochs) at N = 15 beside its floor
step "ResNet34 round rate"
timeout 45 python3 - <<'EOF' 2>&1 | tee "$OUT/resnet34.txt"
from cflcore.fl.device import prepare_device
from cflcore.fl.selfcheck import SPEED_EPOCHS, round_speed
from cflcore.fl.speed import device_rates
device = prepare_device("cuda", True)
n, n_train = 15, 267
s = round_speed(device, "resnet34", n, device_rates(device), n_train=n_train, shape=(3, 32, 32), batch=64)
print(f"resnet34 N = {n} x {n_train} samples: {s.seconds:.2f} s a round (rounds {[round(t, 2) for t in s.rounds]}), "
      f"{n * n_train * SPEED_EPOCHS / s.seconds:.0f} trained samples a second, ratio {s.ratio:.1f}x the {s.parts.line()}")
EOF

# 5. config/paper-mnist5k.yaml's 56 runs end to end on the workstation profile: wall time and train jobs finished
step "paper-mnist5k grid (profiles/gpu-workstation)"
start=$(date +%s)
timeout -s INT 150 python3 -m snakemake --profile profiles/gpu-workstation --cores 16 \
    --configfile config/paper-mnist5k.yaml --config results_dir="$OUT/paper-mnist5k" -- > "$OUT/grid.log" 2>&1
code=$?
echo "exit $code after $(( $(date +%s) - start )) s; runs finished (status.json): " \
     "$(find "$OUT/paper-mnist5k" -name status.json 2>/dev/null | wc -l) of 56" | tee "$OUT/grid.txt"
tail -3 "$OUT/grid.log"
