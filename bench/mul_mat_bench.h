// The benchmark families of loom-bench-mul-mat that live in their own files.
#pragma once

namespace loom {

void register_mul_mat_id_benchmarks();  // mul_mat_id_bench.cpp: mul_mat_id/<type>

}  // namespace loom
