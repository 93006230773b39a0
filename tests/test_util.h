// Shared test helpers: repository paths, seeded random fills, and float comparisons that report
// the worst index with both values.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace mx::test {

std::filesystem::path source_dir();        // repository root (MXSERVE_SOURCE_DIR or derived)
std::filesystem::path fixtures_dir();      // tests/fixtures
std::filesystem::path temp_dir(const std::string& name);  // fresh empty directory per call
std::filesystem::path mxserve_binary();    // built CLI (MXSERVE_BINARY)
// Runs a shell command, returns (exit code, stdout+stderr).
std::pair<int, std::string> run_command(const std::string& cmd);

std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);

// max |a-b| / max |ref|; NMSE = sum (a-b)^2 / sum ref^2.
double max_rel_error(std::span<const float> got, std::span<const float> ref);
double nmse(std::span<const float> got, std::span<const float> ref);
// gtest assertion: every |got-ref| <= atol + rtol*|ref|; reports the first failing index.
::testing::AssertionResult all_close(std::span<const float> got, std::span<const float> ref, double atol,
                                     double rtol);

}  // namespace mx::test
