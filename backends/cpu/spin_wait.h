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

// Waits until ready() is true; sleep() blocks until something may have
// changed. Once give_up() is true it stops spinning and yielding and sleeps.
template <class Ready, class GiveUp, class Sleep>
void spin_then_sleep(int poll, Ready&& ready, GiveUp&& give_up, Sleep&& sleep) {
  const long budget = poll * kPausesPerPoll;
  long spent = 0;
  for (int burst = 1; spent < budget; burst = burst < kMaxBurst ? burst * 2 : burst) {
    if (ready()) return;
    if (give_up()) break;
    for (int i = 0; i < burst; ++i) _mm_pause();
    spent += burst;
  }
  for (int y = 0; poll > 0 && y < kYieldsBeforeSleep && !give_up(); ++y) {
    if (ready()) return;
    sched_yield();
  }
  while (!ready()) sleep();
}

template <class Ready, class Sleep>
void spin_then_sleep(int poll, Ready&& ready, Sleep&& sleep) {
  spin_then_sleep(poll, ready, [] { return false; }, sleep);
}

}  // namespace loom::cpu
