#!/usr/bin/env bash
# Installs the system packages that Lily's build and tests need (Debian/Ubuntu).
# Each one also exists in Homebrew: nlohmann-json, cli11, googletest,
# google-benchmark, openssl@3, node (the server tests drive lily serve with the OpenAI Node client),
# chromium (the web chat page's test).
set -euo pipefail
packages=(build-essential cmake pkg-config nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev libbenchmark-dev python3 curl
          libssl-dev openssl)  # TLS to a cloud tier (lily serve --deployment-config), and the routing test's test CA
packages+=(chromium)  # the web chat page's test (headless, driven by playwright-core from npm)
packages+=(clang libclang-rt-14-dev llvm)  # sanitizer builds and libFuzzer (scripts/test-sanitizers.sh, scripts/fuzz.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js may come from elsewhere than Debian (with its own npm): only a machine without one gets Debian's.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
