#include <gtest/gtest.h>

#include "loom/error.h"
#include "loom/graph_alloc.h"

namespace loom {
namespace {

TEST(FreeBlockAllocator, BestFitPrefersTheSmallestHole) {
  FreeBlockAllocator fa(16, SIZE_MAX);
  auto a = fa.alloc(100);  // [0, 112)
  auto b = fa.alloc(32);   // [112, 144)
  auto c = fa.alloc(48);   // [144, 192)
  auto d = fa.alloc(16);   // [192, 208)
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(d.offset, 192u);
  fa.free(a, 100);  // hole of 112
  fa.free(c, 48);   // hole of 48
  auto e = fa.alloc(40);
  EXPECT_EQ(e.offset, 144u);  // the 48-byte hole, not the 112-byte one
  auto f = fa.alloc(100);
  EXPECT_EQ(f.offset, 0u);
  EXPECT_EQ(fa.chunk_size(0), 208u);  // nothing grew
  (void)b;
}

TEST(FreeBlockAllocator, FreesMergeWithBothNeighbours) {
  FreeBlockAllocator fa(1, SIZE_MAX);
  auto a = fa.alloc(10), b = fa.alloc(10), c = fa.alloc(10);
  auto d = fa.alloc(10);  // keeps the tail apart
  fa.free(a, 10);
  fa.free(c, 10);
  EXPECT_EQ(fa.n_free_blocks(0), 3u);  // a, c, tail
  fa.free(b, 10);                      // joins a and c
  EXPECT_EQ(fa.n_free_blocks(0), 2u);
  auto e = fa.alloc(30);
  EXPECT_EQ(e.offset, 0u);
  fa.free(e, 30);
  fa.free(d, 10);
  EXPECT_EQ(fa.n_free_blocks(0), 1u);  // everything back in one block
  EXPECT_EQ(fa.chunk_size(0), 40u);
}

TEST(FreeBlockAllocator, GrowsTheTailOnlyWhenNothingFits) {
  FreeBlockAllocator fa(1, SIZE_MAX);
  auto a = fa.alloc(50);
  fa.alloc(10);
  fa.free(a, 50);
  fa.alloc(60);  // does not fit the hole: goes to the tail
  EXPECT_EQ(fa.chunk_size(0), 120u);
}

TEST(FreeBlockAllocator, OpensChunksWithoutLimit) {
  FreeBlockAllocator fa(64, 1024);
  std::vector<FreeBlockAllocator::Addr> addrs;
  for (int i = 0; i < 1000; ++i) addrs.push_back(fa.alloc(512));
  EXPECT_EQ(fa.n_chunks(), 500u);
  for (size_t c = 0; c < fa.n_chunks(); ++c) EXPECT_EQ(fa.chunk_size(c), 1024u);
  EXPECT_EQ(fa.total_size(), 500u * 1024u);
  for (auto& a : addrs) fa.free(a, 512);
  auto again = fa.alloc(1024);  // freed chunks are merged and reused
  EXPECT_EQ(again.chunk, 0u);
  EXPECT_EQ(fa.n_chunks(), 500u);
}

TEST(FreeBlockAllocator, ManySmallBlocks) {
  FreeBlockAllocator fa(1, SIZE_MAX);
  std::vector<FreeBlockAllocator::Addr> addrs;
  for (int i = 0; i < 20000; ++i) addrs.push_back(fa.alloc(8));
  for (size_t i = 0; i < addrs.size(); i += 2) fa.free(addrs[i], 8);
  EXPECT_EQ(fa.n_free_blocks(0), 10001u);  // no fixed limit on free blocks
  for (size_t i = 1; i < addrs.size(); i += 2) fa.free(addrs[i], 8);
  EXPECT_EQ(fa.n_free_blocks(0), 1u);
}

TEST(FreeBlockAllocator, RejectsMisuse) {
  FreeBlockAllocator fa(16, 256);
  EXPECT_THROW(fa.alloc(257), Error);
  EXPECT_THROW(fa.alloc(0), Error);
  auto a = fa.alloc(32);
  fa.alloc(32);
  fa.free(a, 32);
  EXPECT_THROW(fa.free(a, 32), Error);  // double free
  EXPECT_THROW(fa.free({3, 0}, 16), Error);
}

}  // namespace
}  // namespace loom
