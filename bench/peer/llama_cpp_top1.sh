#!/usr/bin/env bash
# Does llama.cpp read the GGUF files `lily quantize --gguf` writes as Lily does?
# Builds llama.cpp's CPU library (llama_cpp_build.sh), writes GGUF files of
# the bundled model, and compares the top-1 token at every position of a
# prompt: llama.cpp's (llama_cpp_top1.cpp) and Lily's on the same file.
# llama.cpp rounds the inputs of quantized products to 8 bits, as Lily's
# fast path does (--int8-activations), and that rounding moves this small
# model's logits by tenths: so its top-1 is held to Lily's with int8 inputs
# at every position, and the agreement with Lily's exact float path is shown
# beside it. Positions whose two best logits are within 1e-3 of each other
# in Lily's run are near ties and not counted.
#   bench/peer/llama_cpp_top1.sh [TYPES...]     (default: f32 q8_0 q4_0 q6_k q4_k_m)
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$(pwd)"
lily="$root/build/bin/lily"
build="$(bash bench/peer/llama_cpp_build.sh)"
src="$(dirname "$build")"
top1="$build/llama_cpp_top1"
libs=$(find "$build" -name 'libllama.a' -o -name 'libggml.a' -o -name 'libggml-cpu.a' -o -name 'libggml-base.a' | sort -r)
g++ -O2 -std=c++17 bench/peer/llama_cpp_top1.cpp -I "$src/include" -I "$src/ggml/include" \
  -Wl,--start-group $libs -Wl,--end-group -lpthread -ldl -lm -o "$top1"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# A prompt of the bundled model's own tokens: the chat template around a question.
tokens=$("$lily" tokenize --model models/lily-tiny --text "<|im_start|>user
What is 23 + 58? Answer in one line.<|im_end|>
<|im_start|>assistant
" | python3 -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin))))')
status=0
for type in "${@:-f32 q8_0 q4_0 q6_k q4_k_m}"; do
  for t in $type; do
    "$lily" quantize --model models/lily-tiny --out "$work/$t.gguf" --gguf "$t" >/dev/null
    "$lily" logits --model "$work/$t.gguf" --tokens "$tokens" --out "$work/$t.f32" 2>/dev/null
    "$lily" logits --model "$work/$t.gguf" --tokens "$tokens" --out "$work/$t.int8.f32" --decode --int8-activations 2>/dev/null
    "$top1" "$work/$t.gguf" "$tokens" >"$work/$t.llama" 2>"$work/$t.llama.log" || { tail -5 "$work/$t.llama.log"; exit 1; }
    python3 - "$work/$t.int8.f32" "$work/$t.f32" "$work/$t.llama" "$t" <<'PY' || status=1
import array, sys
int8_path, exact_path, theirs, name = sys.argv[1:]
rows = [line.split() for line in open(theirs)]

def compare(path, label, show):
    logits = array.array("f")
    with open(path, "rb") as f:
        logits.frombytes(f.read())
    vocab = len(logits) // len(rows)
    agree = ties = 0
    for i, (_, tok, _, _) in enumerate(rows):
        row = logits[i * vocab:(i + 1) * vocab]
        order = sorted(range(vocab), key=row.__getitem__, reverse=True)[:2]
        if row[order[0]] - row[order[1]] < 1e-3:
            ties += 1
        elif order[0] == int(tok):
            agree += 1
        elif show:
            print(f"  position {i}: Lily {order[0]} ahead by {row[order[0]] - row[order[1]]:.4f}, llama.cpp {tok}")
    counted = len(rows) - ties
    print(f"{name}: llama.cpp's top-1 is Lily's ({label}) at {agree} of {counted} positions ({ties} near ties not counted)")
    return agree == counted

ok = compare(int8_path, "int8 inputs", True)
compare(exact_path, "exact float path", False)
sys.exit(0 if ok else 1)
PY
  done
done
exit $status
