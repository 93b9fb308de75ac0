// Banks of other format versions in a bank directory (docs/bank-format.md,
// "Older and newer versions"). Each version keeps its files under its own
// directory (version 1: objects/ and quarantine/ at the top; version N >= 2:
// v<N>/), so they are found by name and never read as this version's.
//
// Pure file-system walks through an Fs; thread-compatible (the caller holds
// the bank's LOCK).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "fs/fs.h"

namespace sb {

struct OtherVersions {
  uint64_t v1_files = 0;  // files under objects/ and quarantine/ (version 1)
  uint64_t v1_bytes = 0;
  std::vector<std::string> newer;  // v<N>/ directories with N above this version
};

// Looks at the top of a bank directory. A missing directory finds nothing.
Status find_other_versions(Fs* fs, const std::string& dir, OtherVersions* out);

struct V1Removal {
  uint64_t files = 0, bytes = 0;
  std::vector<std::string> left;  // foreign entries kept (and so their directories)
};

// Deletes a version-1 bank: version-1 object and temporary files in
// objects/<xx>/, every file in quarantine/, then the emptied directories.
// Anything else is left and listed. OK when there is no version-1 bank.
Status remove_v1_bank(Fs* fs, const std::string& dir, V1Removal* out);

}  // namespace sb
