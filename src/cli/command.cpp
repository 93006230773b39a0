// catch_exceptions: the boundary of every command, where exceptions become a Status.
#include "cli/command.h"

#include <exception>

namespace mx::cli {

Status catch_exceptions(std::string_view command, const std::function<Status()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return MX_ERROR("{}: {}", command, e.what());
  } catch (...) {
    return MX_ERROR("{}: unknown exception", command);
  }
}

}  // namespace mx::cli
