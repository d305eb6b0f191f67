// Fuzz target: the rpc server's request handlers (backends/rpc/rpc_service.h),
// as a client's messages reach them after gRPC has parsed the bytes. The
// first input byte picks the handler, the rest is its request message.
// Each input gets a fresh server with one session holding two 4 KiB CPU
// buffers (handles 1 and 2) and one of CPU_Repack (3). A compute request runs twice: as sent, then by
// the id it got, with the request's patches applied to that graph. A handler must answer every request, however malformed, with a
// status: an exception escaping it, a crash or a sanitizer report is a
// finding.
#include <cstdint>
#include <string>

#include "loom/registry.h"
#include "rpc_service.h"

namespace {

using namespace loom::rpc;

template <class Message>
bool parse(Message& m, const uint8_t* data, size_t size) {
  return m.ParseFromArray(data, static_cast<int>(size));
}

// Graphs whose kernels would loop for long over few bytes (zero strides
// broadcast one element): not a memory fault, only slow, so not fuzzed.
bool small(const GraphMsg& g) {
  for (const TensorMsg& t : g.tensors()) {
    __int128 n = 1;
    for (int64_t e : t.ne()) {
      n *= e < 0 ? 1 : e;  // at most 2^16 * 2^63: no overflow
      if (n > (1 << 16)) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Handlers h({&loom::Registry::get().cpu()}, {.max_alloc = 1 << 16, .graph_cache = 2});
  uint64_t id = 0;
  (void)h.open_session(id);
  for (uint32_t layout : {0, 0, 1}) {  // 1 and 2 plain, 3 CPU_Repack
    AllocRequest q;
    q.set_size(4096);
    q.set_layout(layout);
    AllocReply r;
    (void)h.alloc(id, q, r);
  }
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 11) {
    case 0: {
      DeviceRef q;
      MemoryReply r;
      if (parse(q, body, n)) (void)h.memory(q, r);
      break;
    }
    case 1: {
      SupportsOpRequest q;
      SupportsOpReply r;
      if (parse(q, body, n)) (void)h.supports_op(q, r);
      break;
    }
    case 2: {
      AllocRequest q;
      AllocReply r;
      if (parse(q, body, n)) (void)h.alloc(id, q, r);
      break;
    }
    case 3: {
      BufferRef q;
      if (parse(q, body, n)) (void)h.free(id, q);
      break;
    }
    case 4: {
      ClearRequest q;
      if (parse(q, body, n)) (void)h.clear(id, q);
      break;
    }
    case 5: {
      SetBytesChunk q;
      if (parse(q, body, n)) (void)h.set_bytes(id, q.range(), q.range().offset() % 7, q.data());
      break;
    }
    case 6: {
      BytesRange q;
      if (parse(q, body, n)) (void)h.get_bytes(id, q, [](const Chunk&) { return true; });
      break;
    }
    case 7: {
      MemsetRequest q;
      if (parse(q, body, n)) (void)h.memset(id, q);
      break;
    }
    case 8: {
      CopyRequest q;
      if (parse(q, body, n)) (void)h.copy(id, q);
      break;
    }
    case 9: {
      ComputeRequest q;
      ComputeReply r;
      if (parse(q, body, n) && small(q.graph())) {
        ComputeRequest first = q;
        first.clear_patches();
        (void)h.compute(id, first, r);
        ComputeRequest again;
        again.set_graph_id(r.graph_id());
        for (const TensorPatch& p : q.patches())
          if (p.tensor().ne_size() > 0 || p.tensor().nb_size() > 0) *again.add_patches() = p;
        GraphMsg patched;
        for (const TensorPatch& p : again.patches()) *patched.add_tensors() = p.tensor();
        if (small(patched)) (void)h.compute(id, again, r);
      }
      break;
    }
    case 10: {
      // A request of a session that has ended touches nothing.
      BytesRange q;
      if (parse(q, body, n)) {
        (void)h.close_session(id);
        (void)h.set_bytes(id, q, 0, std::string(q.size() % 64, 'x'));
        StatsReply r;
        (void)h.stats(r);
      }
      break;
    }
  }
  return 0;
}
