#!/usr/bin/env bash
# Every GPU check, as one script for a lent GPU machine (under 8 minutes on one H200):
#   1. tests/gpu (the vLLM ones skip where vLLM is not installed),
#   2. bench/gpu_check.py with vLLM where it is installed, else with the hf engine,
#   3. the default job (`turnrl train`) on the GPU, cut at GPU_RUN_TRAIN_S seconds.
# Results go to $OUT (or bench/results/gpu): logs, the bench tables, the run's metrics.
# Python packages the machine lacks may travel as wheels in .whl/ (pip download them here
# for its Python; the device tool's README says how): they are installed to /tmp/site.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/results/gpu}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:src
else
    export PYTHONPATH=src
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers",
transformers.__version__, "cuda", torch.cuda.is_available())'

echo "== tests/gpu"
python3 -m pytest tests/gpu -q -rs -p no:cacheprovider 2>&1 | tee "$out/tests_gpu.log"

echo "== bench/gpu_check.py"
engine=hf
python3 -c 'import vllm' 2>/dev/null && engine=vllm
python3 bench/gpu_check.py --engine "$engine" --results-dir "$out" 2>&1 | tee "$out/gpu_check.log"

echo "== the default job on the GPU"
rm -rf /tmp/gpu-default
timeout "${GPU_RUN_TRAIN_S:-200}" python3 -m turnrl.cli train run.device=cuda \
    run.out_dir=/tmp/gpu-default log.progress=false 2>&1 | tail -n 40 | tee "$out/default_job.log"
metrics=$(ls /tmp/gpu-default/*/metrics.jsonl 2>/dev/null | head -n 1)
[ -n "$metrics" ] && cp "$metrics" "$out/default_job_metrics.jsonl"
exit 0
