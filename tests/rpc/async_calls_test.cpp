// Async operations and events of remote devices. Each client connection
// queues its calls to a server in order on a thread of its own (CallQueue):
// async set/get/copy and graphs return at once, synchronize waits, an event
// is a position in that queue, and a failed call is reported by the next wait.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "call_queue.h"
#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/tensor_alloc.h"
#include "loopback.h"

namespace loom {
namespace {

TEST(CallQueue, AFailedCallDropsTheCallsAfterItAndTheNextWaitReportsIt) {
  rpc::CallQueue q;
  std::vector<int> ran;
  q.push([&] { ran.push_back(1); });
  q.push([] { fail("call 2 failed"); });
  const uint64_t third = q.push([&] { ran.push_back(3); });
  try {
    q.wait(third);
    FAIL() << "the failure was not reported";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "call 2 failed");
  }
  EXPECT_EQ(ran, std::vector<int>{1});
  // Reported once; the queue goes on.
  q.run([&] { ran.push_back(4); });
  EXPECT_EQ(ran, (std::vector<int>{1, 4}));
  EXPECT_EQ(q.last(), 4u);
}

TEST(CallQueue, AQueueThatWaitsForAnotherRunsAfterItsPosition) {
  rpc::CallQueue first, second;
  std::atomic<int> x{0};
  int seen = -1;
  first.push([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the second queue gets there first
    x = 1;
  });
  const uint64_t position = first.last();
  second.push([&] { first.wait_quietly(position); });
  second.run([&] { seen = x; });
  EXPECT_EQ(seen, 1);
}

// Waiters run queued calls themselves when the queue's thread has not
// taken them: still one at a time and in the order queued, whichever
// threads push, wait and run.
TEST(CallQueue, CallsRunOneAtATimeInOrderWhoeverRunsThem) {
  rpc::CallQueue q;
  constexpr int kThreads = 4, kCalls = 500;
  std::mutex order_mutex;
  std::vector<uint64_t> order;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        uint64_t position;
        {
          std::lock_guard lock(order_mutex);  // positions in push order
          position = q.last() + 1;
          EXPECT_EQ(q.push([&, position] {
            if (running.fetch_add(1) != 0) overlapped = true;
            std::this_thread::yield();  // a window for another runner
            order.push_back(position);  // guarded by the queue: one call at a time
            running.fetch_sub(1);
          }), position);
        }
        if (i % 3 == 0) q.wait(position);
      }
    });
  for (auto& t : threads) t.join();
  q.wait(q.last());
  EXPECT_FALSE(overlapped);
  ASSERT_EQ(order.size(), size_t{kThreads * kCalls});
  for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], i + 1);
}

std::vector<float> iota_floats(size_t n, float start) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// Host -> RPC0, a graph on RPC0, RPC0 -> host, and an event that RPC1's
// queue waits for before it reads what the host copied from RPC0 and wrote
// on to RPC1. Every async call returns before its result is read.
TEST(RemoteAsync, CopiesAndGraphsRunInOrderAndEventsOrderTwoServers) {
  auto server0 = test::start_server();
  auto server1 = test::start_server();
  auto family = test::connect({test::endpoint(*server0), test::endpoint(*server1)});
  Device& d0 = *family->devices()[0];
  Device& d1 = *family->devices()[1];
  ASSERT_TRUE(d0.caps().async);
  ASSERT_TRUE(d0.caps().events);
  auto be0 = d0.create_backend();
  auto be1 = d1.create_backend();

  constexpr int64_t n = 4096;
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {n});
  Tensor* doubled = scale(ctx, a, 2.0f, 1.0f);
  Graph graph = Graph::build(doubled);
  auto on0 = allocate_tensors(ctx, d0.default_buffer_type());
  Context ctx1;
  Tensor* b = ctx1.new_tensor(DType::F32, {n});
  auto on1 = allocate_tensors(ctx1, d1.default_buffer_type());
  Context host_ctx;
  Tensor* h = host_ctx.new_tensor(DType::F32, {n});
  auto on_host = allocate_tensors(host_ctx, Registry::get().cpu().default_buffer_type());

  std::vector<float> input = iota_floats(n, -100.0f);
  const std::vector<float> want_a = input;
  be0->set_tensor_async(*a, input.data(), 0, a->nbytes());
  std::fill(input.begin(), input.end(), 0.0f);  // the bytes were taken when the call was made
  be0->compute(graph);
  ASSERT_TRUE(be0->copy_tensor_async(*doubled, *h));  // RPC0 -> host memory
  auto done0 = be0->create_event();
  ASSERT_NE(done0, nullptr);
  done0->record(*be0);
  done0->synchronize();  // the host waits for RPC0
  auto* got = static_cast<const float*>(h->data);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 2.0f * want_a[i] + 1.0f) << "element " << i;

  // Host -> RPC1 behind an event of RPC0: RPC1's queue waits for RPC0's position.
  std::vector<float> back(n), back_a(n);
  be0->get_tensor_async(*a, back_a.data(), 0, a->nbytes());
  done0->record(*be0);
  done0->wait(*be1);
  ASSERT_TRUE(be1->copy_tensor_async(*h, *b));
  be1->get_tensor_async(*b, back.data(), 0, b->nbytes());
  be1->synchronize();
  be0->synchronize();
  EXPECT_EQ(back_a, want_a);
  EXPECT_TRUE(std::equal(back.begin(), back.end(), got));
}

// A call that fails on the queue (the server has gone) is reported by the
// next synchronize, naming the server; the async call itself returned.
TEST(RemoteAsync, AFailedAsyncCallIsReportedBySynchronizeNamingTheServer) {
  auto server = test::start_server();
  const std::string where = test::endpoint(*server);
  auto family = test::connect({where});
  Device& d = *family->devices()[0];
  auto be = d.create_backend();
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {256});
  auto memory = allocate_tensors(ctx, d.default_buffer_type());
  server.reset();
  const std::vector<float> data(256, 1.0f);
  EXPECT_NO_THROW(be->set_tensor_async(*a, data.data(), 0, a->nbytes()));
  try {
    be->synchronize();
    FAIL() << "no error from a server that is gone";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("RPC0 server " + where), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
