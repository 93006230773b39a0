#!/usr/bin/env bash
# Builds mxserve targets on the GPU machine, whose image has nvcc/cmake/ninja but none of the
# -dev packages: `tools/gpu_build.sh prepare` (here) copies them into .carry/ (git-ignored);
# `tools/gpu_build.sh build TARGET...` (there, with carry=[".carry"]) configures and builds.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
carry="$root/.carry"
lib=lib/x86_64-linux-gnu

prepare() {  # run on the development machine, which has the Debian -dev packages
  rm -rf "$carry" && mkdir -p "$carry/include" "$carry/$lib/cmake" "$carry/share/cmake" "$carry/bin"
  for h in fmt nlohmann gtest gmock CLI pcre2.h pcre2posix.h; do cp -r "/usr/include/$h" "$carry/include/"; done
  cp -a /usr/$lib/libfmt.so* /usr/$lib/libgtest*.a /usr/$lib/libgmock*.a /usr/$lib/libpcre2-8.* "$carry/$lib/"
  cp -r /usr/$lib/cmake/fmt /usr/$lib/cmake/GTest "$carry/$lib/cmake/"
  cp -r /usr/share/cmake/CLI11 /usr/share/cmake/nlohmann_json "$carry/share/cmake/"
  # pkg-config (pkgconf) and a relocatable libpcre2-8.pc (prefix relative to the .pc file).
  mkdir -p "$carry/$lib/pkgconfig"
  sed 's|^prefix=.*|prefix=${pcfiledir}/../../..|' /usr/$lib/pkgconfig/libpcre2-8.pc >"$carry/$lib/pkgconfig/libpcre2-8.pc"
  cp -L /usr/bin/pkgconf "$carry/bin/pkg-config" && cp -L /usr/$lib/libpkgconf.so.3 "$carry/$lib/"
  # cpp-httplib (the server) and the shared libraries it links.
  cp /usr/include/httplib.h /usr/include/zlib.h /usr/include/zconf.h "$carry/include/"
  cp -r /usr/include/brotli /usr/include/openssl "$carry/include/"
  cp /usr/include/x86_64-linux-gnu/openssl/* "$carry/include/openssl/"
  cp -a /usr/$lib/libcpp-httplib.so* "$carry/$lib/"
  for l in libssl.so.3 libcrypto.so.3 libz.so.1 libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1; do
    cp -L "/usr/$lib/$l" "$carry/$lib/"
  done
  sed -e 's|^prefix=.*|prefix=${pcfiledir}/../../..|' -e '/^Requires.private/d' \
    /usr/$lib/pkgconfig/cpp-httplib.pc >"$carry/$lib/pkgconfig/cpp-httplib.pc"
  du -sh "$carry"
}

build() {  # run on the GPU machine: build-gpu/ with the carried dependencies
  export PATH="$carry/bin:/usr/local/cuda/bin:$PATH" LD_LIBRARY_PATH="$carry/$lib:${LD_LIBRARY_PATH:-}"
  export PKG_CONFIG_PATH="$carry/$lib/pkgconfig" PKG_CONFIG_LIBDIR="$carry/$lib/pkgconfig"
  cmake -S "$root" -B "$root/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DMXSERVE_CUDA_ARCHS="${MXSERVE_CUDA_ARCHS:-90a}" -DCMAKE_PREFIX_PATH="$carry" \
    -DPKG_CONFIG_EXECUTABLE="$carry/bin/pkg-config" -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/dev/null
  cmake --build "$root/build-gpu" -j"$(nproc)" --target "$@"
}

case "${1:-}" in
  prepare) prepare ;;
  build) shift; build "$@" ;;
  *) echo "usage: $0 prepare | build TARGET..." >&2; exit 2 ;;
esac
