#!/usr/bin/env bash
# Builds llama.cpp's CPU backend (the library and llama-bench) from the source
# inside the npm package node-llama-cpp@3.22.1 (llama/gitRelease.bundle is a
# git bundle of llama.cpp) into a cache folder outside the tree, once, and
# prints the folder of the build. The peer scripts of bench/peer share it.
#   bench/peer/llama_cpp_build.sh        LILY_PEER_CACHE overrides ~/.cache/lily/peers
set -euo pipefail
cache="${LILY_PEER_CACHE:-$HOME/.cache/lily/peers}"
mkdir -p "$cache"
src="$cache/llama.cpp"
if [ ! -d "$src/.git" ]; then
  tmp="$(mktemp -d "$cache/fetch.XXXXXX")"
  (cd "$tmp" && npm pack --silent node-llama-cpp@3.22.1 >/dev/null &&
   tar xzf node-llama-cpp-3.22.1.tgz package/llama/gitRelease.bundle package/llama/binariesGithubRelease.json &&
   git clone -q package/llama/gitRelease.bundle llama.cpp) >&2
  mv "$tmp/llama.cpp" "$src"
  rm -rf "$tmp"
fi
build="$src/build-cpu"
if [ ! -x "$build/bin/llama-bench" ] || [ ! -f "$build/src/libllama.a" ]; then
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF >&2
  cmake --build "$build" -j"$(nproc)" --target llama llama-bench >&2
fi
echo "$build"
