#!/usr/bin/env bash
# For a GPU machine that cannot reach a package registry: fetches (here, from
# Debian) the libraries Lily builds against that such a machine may lack
# (PCRE2, utf8proc, pkg-config) and unpacks them into .gpu-deps/root, which
# scripts/gpu-check.sh uses when it is there. Send .gpu-deps along with the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gpu-deps/debs
(cd .gpu-deps/debs && apt-get download libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 \
   libutf8proc-dev libutf8proc2 pkgconf pkgconf-bin libpkgconf3)
for f in .gpu-deps/debs/*.deb; do dpkg -x "$f" .gpu-deps/root; done
echo "unpacked into .gpu-deps/root"
