// Independent jobs on local threads: job i writes only its own result, so the outcome is the same on
// any number of threads. The first exception a job throws is rethrown once all threads have stopped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fleetsim::detail {

inline void parallel_for(std::size_t jobs, unsigned threads, const std::function<void(std::size_t)>& job,
                         const std::function<void(std::size_t done, std::size_t total)>& progress = {}) {
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex progress_mutex, error_mutex;
  std::exception_ptr error;
  auto worker = [&] {
    for (std::size_t i = next++; i < jobs; i = next++) {
      try {
        job(i);
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      const std::size_t finished = ++done;
      if (progress) {
        const std::lock_guard lock(progress_mutex);
        progress(finished, jobs);
      }
    }
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const unsigned n = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(std::max<std::size_t>(jobs, 1))));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace fleetsim::detail
