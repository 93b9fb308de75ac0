// PinBudget (server/pin_budget.h): a tenant's cache_control pins, by count
// and by the bytes stored under them; other tenants are not charged.
#include "server/pin_budget.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace sb {
namespace {

struct FakeBank {
  int made = 0;
  std::map<std::string, uint64_t> bytes;  // pin id -> bytes held
  // A pin with id `id` expiring at `expires`.
  PinBudget::Pin pin(const std::string& id, int64_t expires) {
    return [this, id, expires](std::string* out, int64_t* exp) {
      ++made;
      *out = id;
      *exp = expires;
      return true;
    };
  }
  PinBudget::BytesOf bytes_of() {
    return [this](const std::string& id) { return bytes.count(id) ? bytes[id] : 0; };
  }
};

TEST(PinBudget, ATenantHoldsAtMostItsPinsAndBytes) {
  PinBudget budget(3, 1000);
  FakeBank bank;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(budget.try_pin("a", 0, bank.pin("p" + std::to_string(i), 100), bank.bytes_of()));
  EXPECT_FALSE(budget.try_pin("a", 0, bank.pin("p3", 100), bank.bytes_of()));
  EXPECT_EQ(bank.made, 3);
  EXPECT_EQ(budget.pins_of("a", 0), 3u);
  // Another tenant is not charged for a's pins.
  EXPECT_TRUE(budget.try_pin("b", 0, bank.pin("q0", 100), bank.bytes_of()));
  // Once a's pins expire, it may pin again.
  EXPECT_EQ(budget.pins_of("a", 100), 0u);
  EXPECT_TRUE(budget.try_pin("a", 100, bank.pin("p4", 200), bank.bytes_of()));
  // Bytes: one pin holding the whole budget stops the next.
  bank.bytes["p4"] = 1000;
  EXPECT_FALSE(budget.try_pin("a", 100, bank.pin("p5", 200), bank.bytes_of()));
  bank.bytes["p4"] = 999;
  EXPECT_TRUE(budget.try_pin("a", 100, bank.pin("p5", 200), bank.bytes_of()));
  // The same pin again (a new TTL) counts once.
  EXPECT_TRUE(budget.try_pin("a", 100, bank.pin("p5", 300), bank.bytes_of()));
  EXPECT_EQ(budget.pins_of("a", 100), 2u);
  EXPECT_EQ(budget.pins_of("a", 250), 1u);
}

TEST(PinBudget, ZeroPinsMeansNone) {
  PinBudget budget(0, 1000);
  FakeBank bank;
  EXPECT_FALSE(budget.try_pin("a", 0, bank.pin("p", 100), bank.bytes_of()));
  EXPECT_EQ(bank.made, 0);
}

}  // namespace
}  // namespace sb
