#!/usr/bin/env bash
# The GPU check: one command that exercises the GPU code paths and times a step on a CUDA machine,
# in about 4 minutes on one H100 (docs/benchmarks.md, "On a GPU").
#
#   bash tools/gpu_check.sh [OUT]          # OUT defaults to runs/gpu-check
#
# 1. OUT/machine.json: the device, Python and package versions;
# 2. OUT/gpu_tests.txt: the gpu test tier (tests/test_gpu.py): a bfloat16 Cooper step with
#    rollout negatives through `cooper train`, and the TRL drop-in example;
# 3. OUT/step_tiny_bf16.json and .md (its log: bench_log.txt): `cooper bench step` of the
#    rule, fixed-RM and Cooper modes (rollout negatives) on the shipped tiny testbed models in
#    bfloat16, with cooper_over_rm, after 6 warm-up steps (on an H100 the first few steps
#    took 0.5-3 s, later ones 0.2-0.3 s);
# 4. with more than one GPU, OUT/example_multi_gpu.txt: the example under `accelerate launch`,
#    one process per GPU.
# Without CUDA the gpu tests skip and say so, and the benchmark runs on the CPU. It needs the
# project's dependencies and nothing from a model hub: every model is shipped with the package.
# Exits non-zero if a step failed; every step runs regardless, so OUT holds all there is.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/gpu-check}
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if ! { mkdir -p "$OUT" 2>/dev/null && [ -w "$OUT" ]; }; then
    echo "gpu_check: cannot write to $OUT; give a writable folder: bash tools/gpu_check.sh OUT" >&2
    exit 2
fi
failed=0
step() { echo "== $1 ($(date +%T))"; }

step "machine"
"$PY" -c "import json; from cooper.infra.environment import environment
print(json.dumps(environment(), indent=1))" | tee "$OUT/machine.json"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=1

step "gpu tests"
"$PY" -m pytest -m gpu -q -rs -p no:cacheprovider tests/test_gpu.py 2>&1 | tee "$OUT/gpu_tests.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || failed=1

step "step benchmark"
if ARITH=$("$PY" -c "from cooper.experiment.testbed import tiny_arith_models
print(tiny_arith_models())"); then
"$PY" -m cooper bench step --preset demo_cpu --steps 10 --warmup 6 --repeats 2 \
    --rm "$ARITH/reward" --out "$OUT/step_tiny_bf16.json" --markdown "$OUT/step_tiny_bf16.md" \
    "policy.model=$ARITH/policy" data.dataset=arith_small data.split=train data.limit=64 \
    rollout.prompts_per_step=4 rollout.samples_per_prompt=8 rollout.micro_batch_size=32 \
    rollout.max_completion_length=48 reward.max_length=256 rm_update.negatives=rollouts \
    rm_update.train_layers=none policy.dtype=bfloat16 policy.lr=0 \
    > "$OUT/bench_log.txt" 2>&1 || { failed=1; tail -n 30 "$OUT/bench_log.txt"; }
cat "$OUT/step_tiny_bf16.md" 2>/dev/null
else
    echo "gpu_check: the shipped tiny models could not be prepared (above); no benchmark"
    failed=1
fi

gpus=$("$PY" -c "import torch; print(torch.cuda.device_count())")
if [ "${gpus:-0}" -gt 1 ] && [ -n "${ARITH:-}" ]; then
    step "the example under accelerate launch, $gpus processes"
    "$PY" -m accelerate.commands.launch --multi_gpu --num_processes "$gpus" \
        examples/cooper_grpo.py --policy "$ARITH/policy" --reward-model "$ARITH/reward" \
        --dataset arith_small --limit 64 --num-generations 8 --batch-size 16 \
        --max-completion-length 48 --max-steps 3 --save-steps 3 \
        --output-dir "$OUT/example_multi_gpu" > "$OUT/example_multi_gpu.txt" 2>&1 || failed=1
    cat "$OUT/example_multi_gpu/rm_replicas.json" 2>/dev/null
fi
step "done (failed=$failed)"
exit $failed
