// Command: one `mxserve` subcommand as CLI11 parsed it and the function that runs it with the
// flags it filled in; catch_exceptions keeps a command's exceptions from passing its boundary.
#pragma once

#include <functional>
#include <string_view>

#include "core/status.h"

namespace CLI {
class App;
}

namespace mx::cli {

struct Command {
  CLI::App* app = nullptr;      // the subcommand; app->parsed() when it was chosen
  std::function<Status()> run;  // never throws; main turns its Status into the exit code
};

// body(), with any exception it throws turned into an error naming the command.
Status catch_exceptions(std::string_view command, const std::function<Status()>& body);

}  // namespace mx::cli
