#!/usr/bin/env bash
# Lily and llama.cpp side by side on a many-core CPU at several thread
# counts (issue: "CPU speed side by side with llama.cpp"), in one run: builds
# `lily` without the GPU backend, writes the 4-layer synth checkpoint of the
# real shapes in MLX 4-bit for Lily and a Q4_0 GGUF of the same shapes for
# llama.cpp, then runs bench/peer/llama_cpp.sh at each thread count.
#   scripts/cpu-peer-scaling.sh [THREADS[:ISA]...]     (default 4 8 16)
# THREADS:ISA caps Lily's kernels at that level (e.g. 16:avx512vnni shows the
# path without AMX tiles on a CPU that has them).
# LLAMA_BENCH names llama.cpp's CPU llama-bench (bench/peer/llama_cpp_build.sh
# builds one); LILY_PEER_ROUNDS the rounds at each count (default 2). On a
# machine that cannot reach a registry the build finds PCRE2 and utf8proc in
# .gpu-deps/root (scripts/gpu-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=(4 8 16)
[ -x "${LLAMA_BENCH:-}" ] || { echo "LLAMA_BENCH must name llama.cpp's llama-bench" >&2; exit 2; }
source scripts/gpu-env.sh
lscpu | grep -E '^(Model name|Socket|Core|Thread|CPU\(s\)|Flags)' | cut -c1-200
cmake -S . -B build-cpu -DCMAKE_BUILD_TYPE=Release -DLILY_CUDA=OFF -DLILY_BUILD_TESTS=OFF -DLILY_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build-cpu -j"$(nproc)" --target lily -- --quiet
export LILY_BIN=$PWD/build-cpu/bin/lily
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$LILY_BIN" synth --out "$work/s4-mlx4" --layers 4 --format mlx4 --seed 1 >/dev/null &
"$LILY_BIN" synth --out "$work/s4-bf16" --layers 4 --format bf16 --seed 1 >/dev/null
cp models/lily-tiny/tokenizer.json models/lily-tiny/tokenizer_config.json models/lily-tiny/chat_template.jinja "$work/s4-bf16/"
"$LILY_BIN" quantize --model "$work/s4-bf16" --out "$work/s4-q4_0.gguf" --gguf q4_0 >/dev/null
rm -rf "$work/s4-bf16"
wait
echo "models written at ${SECONDS} s"
for spec in "${threads[@]}"; do
  t=${spec%%:*}
  isa=()
  [ "$spec" = "$t" ] || isa=(--cpu-isa "${spec#*:}")
  echo "== $t threads ${isa[*]}"
  bash bench/peer/llama_cpp.sh --rounds "${LILY_PEER_ROUNDS:-2}" --threads "$t" "${isa[@]}" "$work/s4-mlx4=$work/s4-q4_0.gguf"
done
echo "done at ${SECONDS} s"
