# Sourced by scripts/test and scripts/fuzz: configures and builds a sanitizer
# build of Loom with clang (libFuzzer needs clang; one compiler for both keeps
# one build folder for the ASan suite and the fuzz targets).
#   sanitizer_build DIR SANITIZERS [TARGETS...]
# -O1 keeps the suite fast enough; -gline-tables-only gives file:line in
# reports at a fraction of -g's compile time; no NDEBUG, so asserts are on.
# No CUDA backend: without a GPU it adds nothing to sanitizer runs, and nvcc
# takes no -fsanitize.
sanitizer_build() {
  local dir=$1 sanitizers=$2
  shift 2
  local fuzz=OFF shards=0
  [[ $sanitizers == *address* ]] && fuzz=ON  # the fuzz targets live in the ASan build
  # ASan: each gtest executable runs as 16 shards, not a process per test
  # (see LOOM_GTEST_SHARDS in tests/CMakeLists.txt). TSan keeps one test per
  # process: scripts/test picks its tests by name.
  [[ $sanitizers == *address* ]] && shards=16
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_FLAGS_DEBUG="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
    -DLOOM_SANITIZE="$sanitizers" -DLOOM_FUZZ=$fuzz -DLOOM_GTEST_SHARDS=$shards -DLOOM_BUILD_TESTS=ON -DLOOM_BUILD_BENCH=OFF -DLOOM_CUDA=OFF \
    >/dev/null || return
  if [[ $# -gt 0 ]]; then
    cmake --build "$dir" -j "${JOBS:-$(nproc)}" --target "$@"
  else
    cmake --build "$dir" -j "${JOBS:-$(nproc)}"
  fi
}

# Sanitizer settings for every process a run starts.
sanitizer_env() {
  export ASAN_OPTIONS=${ASAN_OPTIONS:-"detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1"}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-"print_stacktrace=1:halt_on_error=1"}
  # LeakSanitizer crashes at exit in processes that loaded PoCL: it walks
  # PoCL's dynamic TLS (allocated by the loader, not malloc) and faults on it.
  # use_tls=0 stops it treating TLS as roots; Loom keeps no heap pointers
  # only in thread_local storage, so no leak is hidden or invented by this.
  # scripts/lsan.supp says why each suppression is a false positive.
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  export LSAN_OPTIONS=${LSAN_OPTIONS:-"use_tls=0:suppressions=$here/lsan.supp"}
  # scripts/tsan.supp says why its suppression is a false positive.
  export TSAN_OPTIONS=${TSAN_OPTIONS:-"halt_on_error=1:second_deadlock_stack=1:suppressions=$here/tsan.supp"}
}
