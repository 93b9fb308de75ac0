#include "server/operator/activity.h"

#include "server/protocols/generation.h"

namespace sb {

void Activity::record(CompletedRequest r) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t start = r.time_ms - r.time_ms % kBucketMs;
  if (minutes_.empty() || minutes_.back().start_ms < start) {
    minutes_.push_back(Minute{start});
    while (minutes_.size() > kBuckets || minutes_.front().start_ms <= start - static_cast<int64_t>(kBuckets) * kBucketMs)
      minutes_.pop_front();
  }
  Minute& m = minutes_.back();  // a clock that stepped back counts into the latest minute
  const bool restored = r.restore.restore_point > 0;
  m.requests += 1;
  m.restored += restored ? 1 : 0;
  m.prompt_tokens += static_cast<uint64_t>(r.prompt_tokens);
  m.cached_tokens += static_cast<uint64_t>(r.restore.restore_point);
  (restored ? m.warm : m.cold) += 1;
  (restored ? m.warm_ttft_ms : m.cold_ttft_ms) += r.ttft_ms;
  recent_.push_back(std::move(r));
  if (recent_.size() > kRecent) recent_.pop_front();
}

ResponseJson Activity::to_json(size_t limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  ResponseJson requests = ResponseJson::array();
  for (auto it = recent_.rbegin(); it != recent_.rend() && requests.size() < limit; ++it)
    requests.push_back({{"id", it->id},
                        {"time_ms", it->time_ms},
                        {"endpoint", it->endpoint},
                        {"namespace", it->name_space},
                        {"prompt_tokens", it->prompt_tokens},
                        {"completion_tokens", it->completion_tokens},
                        {"ttft_ms", it->ttft_ms},
                        {"restore", restore_json(it->restore, /*operator_view=*/true)}});
  ResponseJson minutes = ResponseJson::array();
  for (const Minute& m : minutes_)
    minutes.push_back({{"start_ms", m.start_ms},
                       {"requests", m.requests},
                       {"restored", m.restored},
                       {"prompt_tokens", m.prompt_tokens},
                       {"cached_tokens", m.cached_tokens},
                       {"cold", m.cold},
                       {"warm", m.warm},
                       {"cold_ttft_ms", m.cold_ttft_ms},
                       {"warm_ttft_ms", m.warm_ttft_ms}});
  return ResponseJson{{"requests", requests}, {"minutes", minutes}, {"bucket_ms", kBucketMs}};
}

}  // namespace sb
