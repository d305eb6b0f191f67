// The server's side of the wire protocol, apart from the transport: every
// handler checks its request (sizes, buffer handles, byte ranges, graphs via
// decode_graph) and answers a grpc::Status: INVALID_ARGUMENT for a malformed
// request, NOT_FOUND for an unknown buffer, RESOURCE_EXHAUSTED for an
// allocation that fails. No request, however malformed, reaches memory
// outside the buffers it names. rpc_server.cpp puts these handlers behind
// gRPC; the fuzz target (tests/fuzz/rpc_handlers.cpp) calls them directly.
//
// Buffers and graphs belong to a session (open_session .. close_session):
// a handler that touches them names its session and sees only that
// session's handles; close_session frees them all. Each session has its own
// lock and its own backends, so sessions run concurrently; compute on a
// device other than the CPU is still serialised per device (its runtime's
// queues are not known to be safe to share between backends).
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
inline constexpr uint32_t kProtocolVersion = 5;
// The most bytes one compute request may read back in its reply (reads).
inline constexpr uint64_t kMaxReplyReadBytes = 4 << 20;
// Bytes per SetBytes / GetBytes chunk (below gRPC's 4 MiB message limit).
inline constexpr size_t kChunkBytes = size_t{1} << 20;

struct ServiceOptions {
  // Largest single allocation a client may ask for (default: the device's).
  size_t max_alloc = SIZE_MAX;
  // Graphs the server keeps so that a client can run them again by id.
  size_t graph_cache = 8;
  // Sessions open at once; more are refused (RESOURCE_EXHAUSTED).
  size_t max_sessions = 64;
  // Weight cache directory (empty: none): transfers of at least
  // kMinCachedBytes that carry a SHA-256 are kept there as <hex>.bin.
  std::string cache_dir;
};

// The smallest transfer the weight cache keeps.
inline constexpr size_t kMinCachedBytes = size_t{1} << 20;

// What a session held when it ended.
struct SessionEnd {
  size_t buffers = 0;
  uint64_t bytes = 0;
};

class Handlers {
 public:
  Handlers(std::vector<Device*> devices, ServiceOptions options = {});
  ~Handlers();

  // A new session's id (never 0), or RESOURCE_EXHAUSTED when max_sessions are open.
  grpc::Status open_session(uint64_t& id);
  // Frees everything the session holds; an unknown id ends nothing.
  SessionEnd close_session(uint64_t id);

  grpc::Status hello(HelloReply& reply);
  grpc::Status stats(StatsReply& reply) const;
  grpc::Status memory(const DeviceRef& request, MemoryReply& reply);
  grpc::Status supports_op(const SupportsOpRequest& request, SupportsOpReply& reply);
  grpc::Status alloc(uint64_t session, const AllocRequest& request, AllocReply& reply);
  grpc::Status free(uint64_t session, const BufferRef& request);
  grpc::Status clear(uint64_t session, const ClearRequest& request);
  // One SetBytes chunk: `range` is the whole transfer, `done` the bytes of it
  // already written; `data` goes after them.
  grpc::Status set_bytes(uint64_t session, const BytesRange& range, uint64_t done, const std::string& data);
  // Calls `write` for each chunk of the range; a false return stops (the client left).
  grpc::Status get_bytes(uint64_t session, const BytesRange& range, const std::function<bool(const Chunk&)>& write);
  // Fills the range from the weight cache when it holds `sha256`.
  grpc::Status set_from_cache(uint64_t session, const CachedBytes& request, CacheReply& reply);
  // After a SetBytes transfer that named a hash: reads the range back,
  // checks its SHA-256 and keeps it in the cache (no-op without a cache).
  grpc::Status cache_store(uint64_t session, const BytesRange& range, const std::string& sha256);
  grpc::Status memset(uint64_t session, const MemsetRequest& request);
  grpc::Status copy(uint64_t session, const CopyRequest& request);
  // Makes the request's writes, then runs its graph (when it names one).
  grpc::Status compute(uint64_t session, const ComputeRequest& request, ComputeReply& reply);

  size_t n_buffers() const;  // over all sessions

 private:
  struct Session;
  Device* device_at(uint32_t index, grpc::Status& status) const;
  // DeviceInfo.layouts[layout - 1] of the device, or null with the reason.
  BufferType* layout_at(uint32_t device, uint32_t layout, grpc::Status& status) const;
  std::shared_ptr<Session> session_at(uint64_t id, grpc::Status& status) const;
  // Runs f(session) with the session locked, or answers why there is none.
  template <class F>
  grpc::Status in_session(uint64_t id, F&& f);

  std::vector<Device*> devices_;
  std::vector<std::vector<BufferType*>> layouts_;  // per device: its buffer types beyond the default
  ServiceOptions options_;
  mutable std::mutex mutex_;  // guards sessions_ and the counters
  std::map<uint64_t, std::shared_ptr<Session>> sessions_;
  uint64_t sessions_ended_ = 0;
  // Compute on a device other than the CPU: one session at a time.
  std::vector<std::unique_ptr<std::mutex>> device_mutex_;
};

}  // namespace loom::rpc
