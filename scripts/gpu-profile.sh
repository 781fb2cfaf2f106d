#!/usr/bin/env bash
# Where a decode step's device time goes, on a machine with an NVIDIA GPU and
# Nsight Compute: every kernel of a few decode steps of `lily bench --device
# cuda` (the steps it brackets for a profiler), with its duration and the
# DRAM bytes it read, summed by kernel. The sum of the durations against the
# step's wall time shows what is kernels and what is gaps between them.
# Caches and clocks are left as they are in a run (no flush before each
# kernel), so small kernels are timed as the step meets them.
#   scripts/gpu-profile.sh [BUILD_DIR]    (LILY_PROFILE_LAYERS: "4 40"; LILY_PROFILE_FORMAT: mlx4;
#                                         LILY_PROFILE_MODEL: a checkpoint to profile instead of synthesizing)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cuda}
source scripts/gpu-env.sh
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "no Nsight Compute (ncu) on this machine"; exit 1; }
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${LILY_CUDA_ARCH:-90}" \
  -DLILY_BUILD_BENCHMARKS=OFF >/dev/null || exit 1
cmake --build "$build" -j"$(nproc)" --target lily -- --quiet || exit 1
echo "built at ${SECONDS} s"
lily=$build/bin/lily
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
format=${LILY_PROFILE_FORMAT:-mlx4}
steps=4
if [ -n "${LILY_PROFILE_MODEL:-}" ]; then targets=(given); else targets=(${LILY_PROFILE_LAYERS:-4 40}); fi
for layers in "${targets[@]}"; do
  if [ "$layers" = given ]; then
    model=$LILY_PROFILE_MODEL
  else
    model=$work/s$layers
    "$lily" synth --out "$model" --layers "$layers" --format "$format" >/dev/null || exit 1
  fi
  echo "== $model: lily bench (no profiler)"
  "$lily" bench --model "$model" --device cuda --contexts 256 --decode-steps 64 2>&1 | grep -E '^[|]|decode step'
  echo "== $model: $steps decode steps under Nsight Compute"
  "$ncu" --profile-from-start off --cache-control none --clock-control none --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum \
    "$lily" bench --model "$model" --device cuda --child 256 --decode-steps "$steps" >"$work/ncu.csv" 2>"$work/ncu.err" ||
    { tail -5 "$work/ncu.err"; continue; }
  python3 - "$work/ncu.csv" "$steps" <<'PY'
import csv, sys, collections
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
rows = list(csv.reader(lines[start:]))
head, units, data = rows[0], rows[1], rows[2:]
col = {h: i for i, h in enumerate(head)}
def scale(name):  # to microseconds / bytes
    u = units[col[name]]
    return {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3, "byte": 1, "Kbyte": 1e3,
            "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}.get(u, 1)
st, sb = scale("gpu__time_duration.sum"), scale("dram__bytes_read.sum")
print("ncu units:", units[col["gpu__time_duration.sum"]], units[col["dram__bytes_read.sum"]])
steps = int(sys.argv[2])
agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
for r in data:
    name = r[col["Kernel Name"]]
    a = agg[name]
    a[0] += 1
    a[1] += float(r[col["gpu__time_duration.sum"]].replace(",", "")) * st
    a[2] += float(r[col["dram__bytes_read.sum"]].replace(",", "")) * sb
total = sum(a[1] for a in agg.values())
print(f"kernels per step {sum(a[0] for a in agg.values()) / steps:.0f}, kernel time per step {total / steps:.1f} us")
print(f"{'kernel':70s} {'n/step':>7s} {'us/step':>9s} {'share':>6s} {'MB/step':>9s} {'GB/s':>7s}")
for name, (n, us, b) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
    print(f"{name[:70]:70s} {n / steps:7.1f} {us / steps:9.1f} {100 * us / total:5.1f}% {b / steps / 1e6:9.2f} {b / us / 1e3 if us else 0:7.0f}")
PY
  [ -n "${LILY_PROFILE_MODEL:-}" ] || rm -rf "$model"
done
echo "done at ${SECONDS} s"
