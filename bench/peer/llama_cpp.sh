#!/usr/bin/env bash
# Lily and llama.cpp side by side, in one run, on this machine: `lily bench`
# and `llama-bench` (llama.cpp's CPU backend, built by llama_cpp_build.sh)
# alternate for N rounds under one contract, a 512-token prompt (pp512) and
# 64 decode steps after a 256-token prompt (tg64 @ d256), the same threads;
# the medians and Lily's ratio are printed as a Markdown table.
#
#   bench/peer/llama_cpp.sh [--rounds N] [--threads T] [--cpu-isa ISA] [--device cuda] MODEL...
#
# MODEL is a GGUF file both engines run as it is, or LILY_MODEL=FILE.gguf:
# Lily runs the first (an MLX or bf16 checkpoint, say) and llama.cpp the GGUF
# file of the same shapes (or weights). --cpu-isa caps Lily's kernels (avx2,
# avx512, avx512vnni, amx); llama.cpp runs what its build found on the
# machine. --device cuda runs both on the GPU (llama.cpp with every layer
# offloaded); LLAMA_BENCH then names a llama-bench built with CUDA (the
# default build is the CPU one), and LILY_BIN may name the lily to run.
set -euo pipefail
cd "$(dirname "$0")/../.."
lily="${LILY_BIN:-$(pwd)/build/bin/lily}"
rounds=3
threads=$(nproc)
isa=()
device=()
offload=()
models=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --cpu-isa) isa=(--cpu-isa "$2"); shift 2 ;;
    --device) device=(--device "$2"); [ "$2" = cpu ] || offload=(-ngl 99); shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { echo "usage: $0 [--rounds N] [--threads T] [--cpu-isa ISA] [--device cuda] MODEL..." >&2; exit 2; }
[ -x "$lily" ] || { echo "build Lily first (scripts/build.sh): $lily is missing" >&2; exit 1; }
if [ -n "${LLAMA_BENCH:-}" ]; then
  llama_bench=$LLAMA_BENCH
elif [ ${#offload[@]} -gt 0 ]; then
  echo "--device ${device[1]}: name a llama-bench built for it in LLAMA_BENCH" >&2
  exit 2
else
  llama_bench="$(bash bench/peer/llama_cpp_build.sh)/bin/llama-bench"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "$(date -u +%F) $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $threads threads, $rounds rounds" >&2
[ ${#offload[@]} -eq 0 ] || nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >&2 || true

for spec in "${models[@]}"; do
  if [[ "$spec" == *=* ]]; then mine="${spec%%=*}"; theirs="${spec#*=}"; else mine="$spec"; theirs="$spec"; fi
  for f in "$mine" "$theirs"; do [ -e "$f" ] || { echo "$f: no such model" >&2; exit 1; }; done
  for r in $(seq 1 "$rounds"); do
    "$lily" bench --model "$mine" --contexts 256,512 --decode-steps 64 --threads "$threads" "${isa[@]}" "${device[@]}" \
      --json "$work/lily.$r.json" >/dev/null 2>"$work/lily.$r.log" || { cat "$work/lily.$r.log" >&2; exit 1; }
    "$llama_bench" -m "$theirs" -p 512 -n 64 -d 0,256 -t "$threads" "${offload[@]}" -r 1 -o json >"$work/llama.$r.json" \
      2>"$work/llama.$r.log" || { tail -5 "$work/llama.$r.log" >&2; exit 1; }
    echo "  $(basename "$mine") round $r of $rounds" >&2
  done
  python3 - "$work" "$rounds" "$mine" "$theirs" <<'PY'
import json, statistics, sys
work, rounds, mine, theirs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
lily = {"pp512": [], "tg64 @ d256": []}
peer = {"pp512": [], "tg64 @ d256": []}
for r in range(1, rounds + 1):
    rep = json.load(open(f"{work}/lily.{r}.json"))
    by_ctx = {x["context"]: x for x in rep["results"]}
    lily["pp512"].append(by_ctx[512]["prefill"]["tok_s"])
    lily["tg64 @ d256"].append(by_ctx[256]["decode"]["tok_s"])
    for t in json.load(open(f"{work}/llama.{r}.json")):
        if t["n_prompt"] == 512 and t["n_gen"] == 0 and t["n_depth"] == 0:
            peer["pp512"].append(t["avg_ts"])
        if t["n_prompt"] == 0 and t["n_gen"] == 64 and t["n_depth"] == 256:
            peer["tg64 @ d256"].append(t["avg_ts"])
name = mine if mine == theirs else f"{mine} vs {theirs}"
print(f"\n{name}\n")
print("| test | Lily t/s | llama.cpp t/s | ratio | Lily rounds | llama.cpp rounds |")
print("|---|---:|---:|---:|---|---|")
for test in lily:
    a, b = statistics.median(lily[test]), statistics.median(peer[test])
    fmt = lambda v: ", ".join(f"{x:.1f}" for x in v)
    print(f"| {test} | {a:.1f} | {b:.1f} | {a / b:.2f} | {fmt(lily[test])} | {fmt(peer[test])} |")
PY
done
