#!/usr/bin/env bash
# Lily and llama.cpp side by side on a many-core CPU at several thread
# counts (issue: "CPU speed side by side with llama.cpp"), in one run: builds
# `lily` without the GPU backend, writes the models, then runs
# bench/peer/llama_cpp.sh for each model at each thread count.
#   scripts/cpu-peer-scaling.sh [--models LIST] [THREADS[:ISA]...]   (default 4 8 16)
# THREADS:ISA caps Lily's kernels at that level (e.g. 16:avx512vnni shows the
# path without AMX tiles on a CPU that has them). LIST is a comma-separated
# choice of (default mlx4):
#   mlx4      the 4-layer synth checkpoint of the real shapes in MLX 4-bit for
#             Lily, a Q4_0 GGUF of the same weights for llama.cpp
#   q4_k_m    its Q4_K_M GGUF (lily quantize --gguf q4_k_m), both engines on it
#   q4_k_m:N  that file grown to N layers (tools/grow_gguf.py; 40 is the model)
# LLAMA_BENCH names llama.cpp's CPU llama-bench (bench/peer/llama_cpp_build.sh
# builds one); LILY_BIN a lily to run instead of building one;
# LILY_PEER_ROUNDS the rounds at each count (default 2); GGUF_PY llama.cpp's
# gguf-py folder for q4_k_m:N. On a machine that cannot reach a registry the
# build finds PCRE2 and utf8proc in .gpu-deps/root (scripts/gpu-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
models=mlx4
if [ "${1:-}" = "--models" ]; then models="$2"; shift 2; fi
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(4 8 16)
[ -x "${LLAMA_BENCH:-}" ] || { echo "LLAMA_BENCH must name llama.cpp's llama-bench" >&2; exit 2; }
source scripts/gpu-env.sh
lscpu | grep -E '^(Model name|Socket|Core|Thread|CPU\(s\)|Flags)' | cut -c1-200
if [ ! -x "${LILY_BIN:-}" ]; then  # else the lily it names (one built elsewhere, say)
  cmake -S . -B build-cpu -DCMAKE_BUILD_TYPE=Release -DLILY_CUDA=OFF -DLILY_BUILD_TESTS=OFF -DLILY_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build build-cpu -j"$(nproc)" --target lily -- --quiet
  export LILY_BIN=$PWD/build-cpu/bin/lily
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$LILY_BIN" synth --out "$work/s4-bf16" --layers 4 --format bf16 --seed 1 >/dev/null
cp models/lily-tiny/tokenizer.json models/lily-tiny/tokenizer_config.json models/lily-tiny/chat_template.jinja "$work/s4-bf16/"
pairs=()
IFS=, read -r -a wanted <<<"$models"
for m in "${wanted[@]}"; do
  case "$m" in
    mlx4)
      "$LILY_BIN" synth --out "$work/s4-mlx4" --layers 4 --format mlx4 --seed 1 >/dev/null
      "$LILY_BIN" quantize --model "$work/s4-bf16" --out "$work/s4-q4_0.gguf" --gguf q4_0 >/dev/null
      pairs+=("$work/s4-mlx4=$work/s4-q4_0.gguf") ;;
    q4_k_m | q4_k_m:*)
      [ -f "$work/s4-q4_k_m.gguf" ] ||
        "$LILY_BIN" quantize --model "$work/s4-bf16" --out "$work/s4-q4_k_m.gguf" --gguf q4_k_m >/dev/null
      if [ "$m" = q4_k_m ]; then
        pairs+=("$work/s4-q4_k_m.gguf")
      else
        n=${m#q4_k_m:}
        python3 tools/grow_gguf.py "$work/s4-q4_k_m.gguf" "$work/s$n-q4_k_m.gguf" --layers "$n"
        pairs+=("$work/s$n-q4_k_m.gguf")
      fi ;;
    *) echo "--models: unknown model '$m' (mlx4, q4_k_m, q4_k_m:N)" >&2; exit 2 ;;
  esac
done
rm -rf "$work/s4-bf16"
echo "models written at ${SECONDS} s"
for spec in "${threads[@]}"; do
  t=${spec%%:*}
  isa=()
  [ "$spec" = "$t" ] || isa=(--cpu-isa "${spec#*:}")
  echo "== $t threads ${isa[*]}"
  bash bench/peer/llama_cpp.sh --rounds "${LILY_PEER_ROUNDS:-2}" --threads "$t" "${isa[@]}" "${pairs[@]}"
done
echo "done at ${SECONDS} s"
