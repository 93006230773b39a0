// kernel_trace: a CUDA injection library that records every kernel's GPU start and end through
// CUPTI's activity API, graph-launched kernels included (this project's GPU machine has ncu but
// no nsys). Use:
//   export CUDA_INJECTION64_PATH=build-gpu/bench/libkernel_trace.so MXSERVE_KERNEL_TRACE=trace.csv
//   build-gpu/mxserve bench synthetic:120b -p 0 -n 32 -r 1
//   python3 bench/kernel_trace_summary.py trace.csv
// The CSV has one row per kernel: start_ns,end_ns,graph_id,graph_node,grid,block,regs,smem,name
// (start/end in the GPU's nanosecond clock; a programmatic dependent starts before its
// predecessor ends, so summaries use end-to-end gaps, see kernel_trace_summary.py).
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kBufferBytes = 8u << 20;

struct Row {
  uint64_t start, end, graph_node;
  uint32_t graph_id, regs, smem;
  int grid[3], block[3];
  std::string name;
};

std::mutex g_mutex;
std::vector<Row> g_rows;

std::string demangle(const char* name) {
  if (!name) return "?";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  std::free(d);
  return out;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard lock(g_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    g_rows.push_back({k->start, k->end, k->graphNodeId, k->graphId, k->registersPerThread,
                      uint32_t(k->staticSharedMemory + k->dynamicSharedMemory),
                      {k->gridX, k->gridY, k->gridZ}, {k->blockX, k->blockY, k->blockZ},
                      demangle(k->name)});
  }
  std::free(buffer);
}

void write_trace() {
  cuptiActivityFlushAll(1);
  const char* path = std::getenv("MXSERVE_KERNEL_TRACE");
  FILE* f = std::fopen(path && *path ? path : "kernel_trace.csv", "w");
  if (!f) {
    std::perror("kernel_trace: cannot write the trace");
    return;
  }
  std::lock_guard lock(g_mutex);
  std::fprintf(f, "start_ns,end_ns,graph_id,graph_node,grid,block,regs,smem,name\n");
  for (const Row& r : g_rows)  // the name quoted for CSV (no quotes inside C++ names)
    std::fprintf(f, "%llu,%llu,%u,%llu,%dx%dx%d,%dx%dx%d,%u,%u,\"%s\"\n", (unsigned long long)r.start,
                 (unsigned long long)r.end, r.graph_id, (unsigned long long)r.graph_node, r.grid[0], r.grid[1],
                 r.grid[2], r.block[0], r.block[1], r.block[2], r.regs, r.smem, r.name.c_str());
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels written\n", g_rows.size());
}

}  // namespace

// Called by the CUDA driver at cuInit when CUDA_INJECTION64_PATH names this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI activity tracing could not be enabled\n");
    return 0;
  }
  std::atexit(write_trace);
  return 1;
}
