// TpFollowers: the tensor-parallel ranks 1..N-1 of a StepRunner (docs/TENSOR_PARALLEL.md). Each is a
// thread that owns its GPU (CUDA) and a follower StepRunner over its shard of the model and its
// KV cache; rank 0's runner hands it every step it launches, and it launches the same step — same
// tokens, same padding, same graph keys — whose collectives meet rank 0's on the devices. A rank
// that fails once a step is handed out (a follower here, rank 0 in StepRunner) cannot leave the
// others waiting on it inside a collective: the process aborts with the rank's error. The checks
// that fail alike on every rank (a batch's shape and positions) run on rank 0 before the step is
// handed out, and fail only the step's requests, as on one GPU.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/collective.h"
#include "runtime/step_runner.h"

namespace mx {

// Logs that rank `rank` failed with `st` and ends the process (see above).
[[noreturn]] void tp_rank_failed(int rank, const Status& st);

class TpFollowers {
 public:
  // Starts ranks 1..N-1 (model.tp.peers, peer_kv, collectives[1..]) and returns once each has made
  // its runner, or with the first rank's error. Each rank's thread makes its own ops::Context on
  // its GPU (with rank 0's --moe-activation), never profiled: rank 0 alone is timed.
  static Result<std::unique_ptr<TpFollowers>> start(const Model& model, const std::vector<const KvCache*>& peer_kv,
                                                    const StepRunnerArgs& args,
                                                    const std::vector<std::shared_ptr<ops::Collective>>& collectives,
                                                    ops::MoeActivation moe_activation);
  ~TpFollowers();  // each rank finishes the steps it was given, then its thread ends

  void launch(const StepBatch& b);  // every rank launches b

 private:
  struct Rank {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::shared_ptr<const StepBatch>> jobs;
    bool stop = false;
  };
  static void run(Rank& rank, StepRunner& runner, int index);

  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace mx
