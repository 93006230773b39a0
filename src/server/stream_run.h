// serve_stream: the common frame of every streaming endpoint — SSE headers, a chunked provider that
// appends one poll's events, keep-alives and the end of the stream, and on release (done or client
// gone) the cancellation of unfinished choices and the metrics.
#pragma once

#include <memory>
#include <string>

#include <httplib.h>

#include "core/log.h"
#include "server/generation.h"
#include "server/sse.h"

namespace mx::server {

// Run: has `choices`, `last_write` and `done`; fill(out) appends this poll's events and sets
// run->done after the last one.
template <typename Run, typename Fill>
void serve_stream(ServerContext& ctx, httplib::Response& res, std::shared_ptr<Run> run, Fill fill) {
  auto provider = [run, fill](size_t, httplib::DataSink& sink) mutable {
    std::string out;
    try {
      fill(out);
    } catch (const std::exception& e) {  // never let one stream take the process down
      log_error("stream failed: {}", e.what());
      const std::string err = sse_event("error", nlohmann::json{{"error", {{"message", "internal error while streaming"},
                                                                           {"type", "server_error"}}}}.dump());
      sink.write(err.data(), err.size());
      return false;
    }
    out += keep_alive(run->last_write, out.empty());
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (run->done) sink.done();
    return true;
  };
  auto release = [&ctx, run](bool) {
    for (Choice& c : run->choices)
      if (c.reason == FinishReason::None) end_early(c, FinishReason::Cancelled);
    record_metrics(ctx, run->choices);
  };
  set_sse_headers(res);
  res.set_chunked_content_provider("text/event-stream", provider, release);
}

}  // namespace mx::server
