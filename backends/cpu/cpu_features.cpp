#include "cpu_features.h"

#include <cpuid.h>

#include <fstream>

namespace loom::cpu {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

std::string read_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

CpuFeatures detect() {
  CpuFeatures f;
  f.model_name = read_model_name();
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = (xcr0 & 0xe6) == 0xe6;
  const bool os_amx = (xcr0 & (3u << 17)) == (3u << 17);
  f.fma = os_avx && (c & (1u << 12));
  f.f16c = os_avx && (c & (1u << 29));
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  f.avx2 = os_avx && (b & (1u << 5));
  f.avx512f = os_avx512 && (b & (1u << 16));
  f.avx512dq = os_avx512 && (b & (1u << 17));
  f.avx512bw = os_avx512 && (b & (1u << 30));
  f.avx512vl = os_avx512 && (b & (1u << 31));
  f.avx512vnni = os_avx512 && (c & (1u << 11));
  f.amx_bf16 = os_amx && (d & (1u << 22));
  f.amx_int8 = os_amx && (d & (1u << 25));
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512bf16 = os_avx512 && (a & (1u << 5));
  return f;
}

}  // namespace

std::string CpuFeatures::summary() const {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
  add(avx512f, "AVX512");
  add(avx512vnni, "AVX512_VNNI");
  add(avx512bf16, "AVX512_BF16");
  add(amx_int8, "AMX_INT8");
  add(amx_bf16, "AMX_BF16");
  return s.empty() ? "scalar" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

}  // namespace loom::cpu
