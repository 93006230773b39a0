// bench_sampler: the host sampler (runtime/sampler.cpp) on one row of 201,088 logits, µs per token
// for the common settings. The row is N(0, 2) noise with a dozen peaks holding ~99% of the mass
// (like a language model's), plus a flat row (N(0, 0.1)) for top-p's worst case.
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/sampler.h"

int main() {
  const size_t V = 201088;
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0.0f, 2.0f), small(0.0f, 0.1f);
  std::vector<float> peaked(V), flat(V);
  for (float& x : peaked) x = noise(rng);
  for (int i = 0; i < 12; ++i) peaked[size_t(rng() % V)] = 17.0f + 0.25f * float(i);
  for (float& x : flat) x = small(rng);
  struct Case {
    const char* name;
    mx::SamplingParams p;
    const std::vector<float>* row;
  };
  const Case cases[] = {
      {"greedy", {}, &peaked},
      {"temperature 1", {.temperature = 1.0f, .seed = 3}, &peaked},
      {"temperature 1, top_p 0.9", {.temperature = 1.0f, .top_p = 0.9f, .seed = 3}, &peaked},
      {"temperature 0.7, top_k 50", {.temperature = 0.7f, .top_k = 50, .seed = 3}, &peaked},
      {"temperature 1, top_p 0.95, min_p 0.05",
       {.temperature = 1.0f, .top_p = 0.95f, .min_p = 0.05f, .seed = 3},
       &peaked},
      {"temperature 1, top_p 0.99, flat row", {.temperature = 1.0f, .top_p = 0.99f, .seed = 3}, &flat},
  };
  std::printf("| sampling (V = %zu) | µs per token |\n|---|--:|\n", V);
  for (const Case& c : cases) {
    mx::Sampler s(c.p);
    const int reps = 30;
    long ids = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) ids += s.sample(*c.row);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("| %s | %.1f |\n", c.name, us);
    std::fprintf(stderr, "%s: sum of the drawn ids %ld\n", c.name, ids);  // the draws are used
  }
}
