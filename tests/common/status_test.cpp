#include "common/status.h"

#include <gtest/gtest.h>

namespace sb {

Status fails_then_stops(int* reached) {
  SB_RETURN_IF_ERROR(Status::corruption("bad checksum"));
  *reached = 1;
  return Status::ok();
}

TEST(Status, ReturnIfErrorStopsAtTheFirstFailure) {
  int reached = 0;
  Status s = fails_then_stops(&reached);
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_EQ(s.to_string(), "corruption: bad checksum");
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(Status::ok().is_ok());
}

}  // namespace sb
