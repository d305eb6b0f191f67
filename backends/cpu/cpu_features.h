// What the CPU can run, read once with cpuid and xgetbv (the OS must save the
// wider registers too). -march=native misdetects CPUs under some hypervisors,
// so kernels are built per ISA and chosen here at run time.
#pragma once

#include <string>

namespace loom::cpu {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool amx_int8 = false, amx_bf16 = false;

  bool has_avx2_fma() const { return avx2 && fma && f16c; }
  bool has_avx512_vnni() const { return avx512f && avx512bw && avx512vl && avx512dq && avx512vnni && f16c; }
  std::string summary() const;  // "AVX2 FMA F16C AVX512 VNNI ..."
  std::string model_name;       // from /proc/cpuinfo
};

const CpuFeatures& cpu_features();

}  // namespace loom::cpu
