// find_tokenizer_file: the explicit file wins, then the model folder's tokenizer.json, then
// $MXSERVE_TOKENIZER; an explicit file or variable naming nothing is an error, not a fall-through.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "test_util.h"
#include "tokenizer/tokenizer_env_guard.h"
#include "tokenizer/tokenizer_file.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

// A folder with model/tokenizer.json, flag.json and env.json (the contents do not matter here).
struct Files {
  fs::path dir = test::temp_dir("tokenizer_file");
  fs::path model = dir / "model", flag = dir / "flag.json", env = dir / "env.json";
  Files() {
    fs::create_directories(model);
    for (const fs::path& p : {model / "tokenizer.json", flag, env}) std::ofstream(p) << "{}";
  }
};

using test::EnvTokenizer;

fs::path found(const TokenizerSearch& search) {
  auto r = find_tokenizer_file(search);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() && r.value() ? *r.value() : fs::path("(none)");
}

TEST(TokenizerFile, FlagThenModelFolderThenEnvironment) {
  const Files f;
  const EnvTokenizer env(f.env.string());
  EXPECT_EQ(found({.file = f.flag, .model_dir = f.model}), f.flag);
  EXPECT_EQ(found({.model_dir = f.model}), f.model / "tokenizer.json");
  EXPECT_EQ(found({.model_dir = f.dir}), f.env);  // a folder without tokenizer.json
  EXPECT_EQ(found({}), f.env);                    // no model folder (synthetic models, harmony)
}

TEST(TokenizerFile, NoneFoundIsNotAnError) {
  const Files f;
  const EnvTokenizer env("");
  auto r = find_tokenizer_file({.model_dir = f.dir});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r.value().has_value()) << *r.value();
  EXPECT_EQ(found({.model_dir = f.model}), f.model / "tokenizer.json");
}

TEST(TokenizerFile, MissingExplicitFileOrVariableIsAnError) {
  const Files f;
  const EnvTokenizer env((f.dir / "no-such.json").string());
  auto flag = find_tokenizer_file({.file = f.dir / "typo.json", .model_dir = f.model});
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("--tokenizer " + (f.dir / "typo.json").string() + " does not exist"),
            std::string::npos)
      << flag.status().message();
  auto model_flag = find_tokenizer_file({.file = f.dir / "typo.json", .file_flag = "--model"});
  ASSERT_FALSE(model_flag.ok());
  EXPECT_NE(model_flag.status().message().find("--model "), std::string::npos) << model_flag.status().message();
  auto from_env = find_tokenizer_file({.model_dir = f.dir});
  ASSERT_FALSE(from_env.ok());
  EXPECT_NE(from_env.status().message().find("MXSERVE_TOKENIZER=" + (f.dir / "no-such.json").string()),
            std::string::npos)
      << from_env.status().message();
  EXPECT_EQ(found({.model_dir = f.model}), f.model / "tokenizer.json");  // the folder's wins before the variable
}

}  // namespace
}  // namespace mx
