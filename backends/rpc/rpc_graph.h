// Graphs on the wire. The client encodes the nodes of a graph whose tensors
// lie in one server's buffers (encode_graph); the server rebuilds them over
// its own buffers (decode_graph), checking every field first: types, shapes
// and strides, operand and view indices, op ids and operand counts from the
// op table, each node's type, shape and strides against what its ops.h
// builder gives for its operands, and every tensor's bytes within its buffer.
// A message that fails a check is an Error naming the tensor; nothing of it
// reaches a kernel.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "loom/backend.h"
#include "loom/graph.h"
#include "loom_rpc.pb.h"

namespace loom::rpc {

// Remote handle and byte offset of a client tensor's memory.
struct RemoteRef {
  uint64_t buffer = 0;  // 0: no memory
  uint64_t offset = 0;
};
using RemoteRefOf = std::function<RemoteRef(const Tensor&)>;

// Fills `out` with `t` as data: type, shape, strides and memory, no op.
void encode_tensor(const Tensor& t, RemoteRef ref, TensorMsg& out);

// Serializes `nodes` and every tensor they reach (operands, view sources).
void encode_graph(std::span<Tensor* const> nodes, const RemoteRefOf& ref_of, uint32_t device, GraphMsg& out);

// The fields encode_graph would write for `nodes`, but the tensors' names,
// as one flat array: two graphs with equal signatures encode to messages
// that differ in names only. Far cheaper to make and compare than a
// message, so a client can tell a graph it has sent before without
// encoding it.
using GraphSignature = std::vector<uint64_t>;
GraphSignature graph_signature(std::span<Tensor* const> nodes, const RemoteRefOf& ref_of, uint32_t device);

// A graph rebuilt on the server: tensors own their metadata, buffers keep
// the memory alive.
struct DecodedGraph {
  std::deque<Tensor> tensors;
  Graph graph;
};
using BufferLookup = std::function<std::shared_ptr<Buffer>(uint64_t handle)>;

// Checks and rebuilds `msg` for `device`; throws loom::Error on any fault.
// With a null `lookup` only shapes are checked: tensors get no memory
// (Device::supports_op questions).
std::unique_ptr<DecodedGraph> decode_graph(const GraphMsg& msg, Device& device, const BufferLookup& lookup);

}  // namespace loom::rpc
