// Waiting for another thread with a budget: spin (pause, with exponential
// backoff so that pollers do not hammer the cache line), then yield the core
// (another process or a descheduled pool thread may need it), then sleep.
// The budget comes from the poll level (0..kMaxPoll, llama.cpp's --poll):
// 0 sleeps at once.
#pragma once

#include <immintrin.h>
#include <sched.h>

#include <atomic>

namespace loom::cpu {

// Pause instructions spun per poll level before yielding (poll 50: about
// 100k pauses, from tens of microseconds to about 2 ms depending on the
// CPU's pause). Checks back off to one per kMaxBurst pauses: a few hundred
// cycles of latency at most, when a hand-off takes microseconds.
inline constexpr long kPausesPerPoll = 2048;
inline constexpr int kMaxBurst = 8;
inline constexpr int kYieldsBeforeSleep = 16;

// Waits until ready() is true; sleep() blocks until something may have changed.
template <class Ready, class Sleep>
void spin_then_sleep(int poll, Ready&& ready, Sleep&& sleep) {
  const long budget = poll * kPausesPerPoll;
  long spent = 0;
  for (int burst = 1; spent < budget; burst = burst < kMaxBurst ? burst * 2 : burst) {
    if (ready()) return;
    for (int i = 0; i < burst; ++i) _mm_pause();
    spent += burst;
  }
  for (int y = 0; poll > 0 && y < kYieldsBeforeSleep; ++y) {
    if (ready()) return;
    sched_yield();
  }
  while (!ready()) sleep();
}

}  // namespace loom::cpu
