// `mxserve bench`: its flags turned into BenchOptions, the run, and the printed table.
#include "cli/bench_cmd.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>

#include "core/log.h"
#include "runtime/bench.h"

namespace mx::cli {
namespace {

Result<std::vector<int>> int_list(const std::string& flag, const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const int x = std::stoi(item, &used);
      MX_CHECK(used == item.size() && x >= 0, "{}: '{}' is not a non-negative integer", flag, item);
      v.push_back(x);
    } catch (const std::exception&) {
      return MX_ERROR("{}: '{}' is not a non-negative integer", flag, item);
    }
  }
  return v;
}

Status run_and_print(const BenchFlags& f) {
  BenchOptions o;
  MX_ASSIGN(o.prompt_lengths, int_list("-p", f.prompts));
  MX_ASSIGN(o.gen_lengths, int_list("-n", f.gens));
  MX_ASSIGN(o.depths, int_list("-d", f.depths));
  MX_ASSIGN(o.batches, int_list("-b", f.batches));
  for (int b : o.batches) MX_CHECK(b >= 1, "-b: batch sizes must be >= 1");
  o.reps = f.reps;
  o.profile = f.profile;
  o.graphs = f.no_graphs ? UseGraphs::No : UseGraphs::Yes;
  MX_ASSIGN(const Device device, select_device(f.backend));
  MX_ASSIGN(o.moe_activation, moe_activation_setting(f.moe_activation));
  MX_ASSIGN(const Mxfp4Layers mxfp4, parse_mxfp4_layers(f.mxfp4_layers));
  MX_ASSIGN(const KvCacheSettings kv, kv_cache_settings(f.kv_cache));
  o.kv_cache_dtype = kv.dtype;
  MX_ASSIGN(o.speculative, parse_speculative_config(f.speculative));
  MX_CHECK(f.spec_acceptance_rate < 0 || o.speculative.enabled(),
           "--spec-acceptance-rate needs --speculative-config with num_speculative_tokens >= 1");
  o.spec_acceptance_rate = f.spec_acceptance_rate;
  MX_ASSIGN(auto model, Model::load(f.model, device, ShowProgress::Yes, mxfp4, f.tensor_parallel));
  auto on_row = [](const BenchRow& r) {
    if (r.skipped.empty())
      log_info("{}{} batch {}: {:.2f} t/s", r.test, r.depth ? fmt::format(" @ d{}", r.depth) : "", r.batch, r.mean);
  };
  MX_ASSIGN(BenchReport rep, run_bench(*model, o, on_row));
  std::printf("\ncopy bandwidth (device to device, read + write): %.0f GB/s\n", rep.copy_gbps);
  if (model->tp_size() > 1)
    std::printf("tensor parallel over %d GPUs: t/s is the whole model's; GB/s and %% of floor are one GPU's (the bytes of "
                "its shard)\n",
                model->tp_size());
  std::printf("\n%s", format_bench_table(*model, rep).c_str());
  if (!rep.profile.empty()) std::printf("\n%s", format_profile_table(rep).c_str());
  return ok_status();
}

}  // namespace

Status bench(const BenchFlags& f) {
  return catch_exceptions("bench", [&] { return run_and_print(f); });
}

Command register_bench(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  auto* cmd = app.add_subcommand("bench", "Prefill and decode throughput, llama-bench style");
  cmd->add_option("model", f->model, "Model folder, HF repo id, or synthetic:20b / synthetic:120b / synthetic:tiny")
      ->required();
  cmd->add_option("-p,--n-prompt", f->prompts, "Prompt lengths for pp tests, comma-separated (0 = none)")
      ->default_val("2048");
  cmd->add_option("-n,--n-gen", f->gens, "Generated tokens for tg tests, comma-separated (0 = none)")
      ->default_val("32,128");
  cmd->add_option("-d,--n-depth", f->depths, "Context depths (tokens already in the cache), comma-separated")
      ->default_val("0");
  cmd->add_option("-b,--batch", f->batches, "Decode batch sizes (sequences decoded together), comma-separated")
      ->default_val("1");
  cmd->add_option("-r,--repetitions", f->reps, "Timed repetitions per test (after one warm-up)")
      ->default_val(3)->check(CLI::PositiveNumber);
  cmd->add_option("--backend", f->backend, "auto (CUDA if present), cpu, cuda")
      ->default_val("auto")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  add_moe_activation_option(cmd, &f->moe_activation);
  add_mxfp4_layers_option(cmd, &f->mxfp4_layers);
  add_tensor_parallel_option(cmd, &f->tensor_parallel);
  add_kv_cache_dtype_options(cmd, &f->kv_cache, KvScaleOption::No);
  add_speculative_option(cmd, &f->speculative);
  cmd->add_option("--spec-acceptance-rate", f->spec_acceptance_rate,
                  "bench only: every round drafts k tokens and accepts each with this probability (a seeded "
                  "generator) whatever the target samples, so a round's cost is measured at a fixed acceptance "
                  "length (rows marked FORCED); default: the target decides")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--profile", f->profile, "Print a per-op time table of one decode step");
  cmd->add_flag("--no-graphs", f->no_graphs, "Launch decode steps op by op instead of replaying a CUDA graph");
  return {.app = cmd, .run = [f] { return bench(*f); }};
}

}  // namespace mx::cli
