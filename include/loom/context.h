// A Context creates and owns tensor metadata. It never allocates tensor data:
// tensors get memory when a buffer places them (see backend.h).
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <span>
#include <string_view>

#include "loom/tensor.h"

namespace loom {

class Context {
 public:
  Context() = default;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // A new contiguous tensor; unspecified trailing dims are 1.
  Tensor* new_tensor(DType type, std::span<const int64_t> ne);
  Tensor* new_tensor(DType type, std::initializer_list<int64_t> ne) {
    return new_tensor(type, std::span<const int64_t>(ne.begin(), ne.size()));
  }
  // Same type and shape as `t`, contiguous.
  Tensor* dup_tensor(const Tensor& t);

  // A blank tensor for op builders to fill in.
  Tensor* new_node();

  Tensor* find(std::string_view name);
  std::deque<Tensor>& tensors() { return tensors_; }
  size_t size() const { return tensors_.size(); }

 private:
  std::deque<Tensor> tensors_;  // deque: addresses stay stable as it grows
};

}  // namespace loom
