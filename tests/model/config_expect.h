// Parsing a config.json given as JSON in tests, and expecting its error to
// name the field (config_test, qwen4exp_config_test).
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"

namespace sb::testing {

inline Status parse_config_as(const nlohmann::json& j, ModelConfig* c) {
  return parse_config_json(j.dump(), "/m/config.json", c);
}

// Expects an error whose message names the file and `field`.
inline void expect_config_error(const nlohmann::json& j, const std::string& field) {
  ModelConfig c;
  Status s = parse_config_as(j, &c);
  ASSERT_FALSE(s.is_ok()) << "accepted a config with a bad " << field;
  EXPECT_NE(s.message().find("/m/config.json"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(field), std::string::npos) << "error does not name " << field << ": " << s.message();
}

}  // namespace sb::testing
