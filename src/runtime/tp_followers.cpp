// TpFollowers: one thread per tensor-parallel rank > 0, replaying rank 0's steps on its GPU.
#include "runtime/tp_followers.h"

#include <cstdlib>
#include <future>

#include "core/log.h"

namespace mx {

void tp_rank_failed(int rank, const Status& st) {
  log_error("tensor-parallel rank {} failed: {}; the other ranks would wait on it forever, so mxserve stops", rank,
            st.message());
  std::abort();
}

Result<std::unique_ptr<TpFollowers>> TpFollowers::start(const Model& model, const std::vector<const KvCache*>& peer_kv,
                                                         const StepRunnerArgs& args,
                                                         const std::vector<std::shared_ptr<ops::Collective>>& collectives,
                                                         ops::MoeActivation moe_activation) {
  const int n = model.tp_size();
  MX_CHECK(int(model.tp.peers.size()) == n - 1 && int(peer_kv.size()) == n - 1 && int(collectives.size()) == n,
           "tensor parallelism: {} ranks with {} peer models, {} peer caches, {} collectives", n, model.tp.peers.size(),
           peer_kv.size(), collectives.size());
  std::unique_ptr<TpFollowers> f(new TpFollowers());
  const Device dev = model.weights.device;
  for (int r = 1; r < n; ++r) {
    auto rank = std::make_unique<Rank>();
    std::promise<Status> made;
    auto ready = made.get_future();
    Rank* self = rank.get();
    rank->thread = std::thread([self, &made, r, dev, m = model.tp.peers[size_t(r - 1)].get(), kv = peer_kv[size_t(r - 1)],
                                args, tp = collectives[size_t(r)], moe_activation] {
      Status st = ops::use_gpu(dev, r);
      std::unique_ptr<ops::Context> cx;  // outlives the runner
      std::unique_ptr<StepRunner> runner;
      if (st.ok()) {
        auto made_cx = ops::Context::create(dev, {.moe_activation = moe_activation});
        if (made_cx.ok()) cx = std::move(*made_cx);
        else st = made_cx.status();
      }
      if (st.ok()) {
        auto created = StepRunner::create_follower(*cx, *m, *kv, args, tp);
        if (created.ok()) runner = std::move(*created);
        else st = created.status();
      }
      made.set_value(st);
      if (st.ok()) run(*self, *runner, r);
    });
    const Status st = ready.get();
    f->ranks_.push_back(std::move(rank));
    MX_TRY(st.with_context(fmt::format("tensor-parallel rank {}", r)));
  }
  return f;
}

TpFollowers::~TpFollowers() {
  for (auto& r : ranks_) {
    {
      std::lock_guard lock(r->mu);
      r->stop = true;
    }
    r->cv.notify_all();
  }
  for (auto& r : ranks_)
    if (r->thread.joinable()) r->thread.join();
}

void TpFollowers::launch(const StepBatch& b) {
  auto job = std::make_shared<const StepBatch>(b);
  for (auto& r : ranks_) {
    {
      std::lock_guard lock(r->mu);
      r->jobs.push_back(job);
    }
    r->cv.notify_one();
  }
}

void TpFollowers::run(Rank& rank, StepRunner& runner, int index) {
  for (;;) {
    std::shared_ptr<const StepBatch> job;
    {
      std::unique_lock lock(rank.mu);
      rank.cv.wait(lock, [&] { return rank.stop || !rank.jobs.empty(); });
      if (rank.jobs.empty()) break;  // stopped, and every step given was launched
      job = std::move(rank.jobs.front());
      rank.jobs.pop_front();
    }
    if (runner.in_flight() >= StepRunner::kMaxInFlight)
      if (auto out = runner.collect(); !out.ok()) tp_rank_failed(index, out.status());
    if (Status st = runner.launch(*job); !st.ok()) tp_rank_failed(index, st);
  }
  while (runner.in_flight() > 0)
    if (auto out = runner.collect(); !out.ok()) tp_rank_failed(index, out.status());
}

}  // namespace mx
