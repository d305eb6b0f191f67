// The server's side of the wire protocol, apart from the transport: every
// handler checks its request (sizes, buffer handles, byte ranges, graphs via
// decode_graph) and answers a grpc::Status: INVALID_ARGUMENT for a malformed
// request, NOT_FOUND for an unknown buffer, RESOURCE_EXHAUSTED for an
// allocation that fails. No request, however malformed, reaches memory
// outside the buffers it names. rpc_server.cpp puts these handlers behind
// gRPC; the fuzz target (tests/fuzz/rpc_service.cpp) calls them directly.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "loom/backend.h"
#include "loom_rpc.pb.h"
#include "rpc_graph.h"

namespace loom::rpc {

// Bumped when the messages change meaning; Hello reports it.
inline constexpr uint32_t kProtocolVersion = 1;
// Bytes per SetBytes / GetBytes chunk (below gRPC's 4 MiB message limit).
inline constexpr size_t kChunkBytes = size_t{1} << 20;

struct ServiceOptions {
  // Largest single allocation a client may ask for (default: the device's).
  size_t max_alloc = SIZE_MAX;
  // Graphs the server keeps so that a client can run them again by id.
  size_t graph_cache = 8;
  // Weight cache directory (empty: none): transfers of at least
  // kMinCachedBytes that carry a SHA-256 are kept there as <hex>.bin.
  std::string cache_dir;
};

// The smallest transfer the weight cache keeps.
inline constexpr size_t kMinCachedBytes = size_t{1} << 20;

class Handlers {
 public:
  Handlers(std::vector<Device*> devices, ServiceOptions options = {});
  ~Handlers();

  grpc::Status hello(HelloReply& reply);
  grpc::Status memory(const DeviceRef& request, MemoryReply& reply);
  grpc::Status supports_op(const SupportsOpRequest& request, SupportsOpReply& reply);
  grpc::Status alloc(const AllocRequest& request, AllocReply& reply);
  grpc::Status free(const BufferRef& request);
  grpc::Status clear(const ClearRequest& request);
  // One SetBytes chunk: `range` is the whole transfer, `done` the bytes of it
  // already written; `data` goes after them.
  grpc::Status set_bytes(const BytesRange& range, uint64_t done, const std::string& data);
  // Calls `write` for each chunk of the range; a false return stops (the client left).
  grpc::Status get_bytes(const BytesRange& range, const std::function<bool(const Chunk&)>& write);
  // Fills the range from the weight cache when it holds `sha256`.
  grpc::Status set_from_cache(const CachedBytes& request, CacheReply& reply);
  // After a SetBytes transfer that named a hash: reads the range back,
  // checks its SHA-256 and keeps it in the cache (no-op without a cache).
  grpc::Status cache_store(const BytesRange& range, const std::string& sha256);
  grpc::Status memset(const MemsetRequest& request);
  grpc::Status copy(const CopyRequest& request);
  grpc::Status compute(const ComputeRequest& request, ComputeReply& reply);

  size_t n_buffers() const;

 private:
  struct CachedGraph {
    uint64_t id;
    uint32_t device;
    std::unique_ptr<DecodedGraph> graph;
  };
  Device* device_at(uint32_t index, grpc::Status& status) const;
  std::shared_ptr<Buffer> buffer_at(uint64_t handle) const;  // null if unknown
  // The buffer of `range`, with the range checked against its size.
  std::shared_ptr<Buffer> checked_range(const BytesRange& range, grpc::Status& status) const;
  Backend& backend_for(uint32_t device);

  std::vector<Device*> devices_;
  ServiceOptions options_;
  mutable std::mutex mutex_;  // one request at a time touches the state below
  std::map<uint64_t, std::shared_ptr<Buffer>> buffers_;
  uint64_t next_handle_ = 1;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::list<CachedGraph> graphs_;  // most recent first
  uint64_t next_graph_id_ = 1;
};

}  // namespace loom::rpc
