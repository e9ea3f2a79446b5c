#pragma once
// Runs jobs 0 … n-1 on `workers` threads (eval --server --concurrency K: K requests in
// flight), each job handed out in index order to the next free thread. After a job throws,
// no job starts; the ones running finish (so rows already being computed are still
// written), then the first exception is rethrown. One worker runs them in order on the
// calling thread.
#include <cstddef>
#include <functional>

namespace deferkv::eval {

void run_concurrently(size_t n_jobs, int workers, const std::function<void(size_t job)>& run);

}  // namespace deferkv::eval
