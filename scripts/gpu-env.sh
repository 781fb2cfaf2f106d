# Sourced by the GPU scripts: where .gpu-deps/root holds Debian's PCRE2,
# utf8proc and pkg-config (scripts/gpu-deps.sh), builds find them there.
deps=$PWD/.gpu-deps/root
if [ -d "$deps" ]; then
  multi=$deps/usr/lib/x86_64-linux-gnu
  export PKG_CONFIG_PATH=$multi/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps
  export LD_LIBRARY_PATH=$multi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  command -v pkg-config >/dev/null || export PATH=$deps/usr/bin:$PATH
fi
