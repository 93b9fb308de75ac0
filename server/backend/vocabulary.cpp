#include "server/backend/vocabulary.h"

namespace sb {

std::shared_ptr<const constrain::Vocabulary> make_vocabulary(const Tokenizer& tokenizer, int64_t logits_size) {
  std::vector<std::string> bytes(static_cast<size_t>(logits_size));
  std::vector<bool> special(bytes.size(), false);
  for (const AddedToken& a : tokenizer.added_tokens())
    if (a.special && a.id >= 0 && static_cast<size_t>(a.id) < special.size()) special[static_cast<size_t>(a.id)] = true;
  for (size_t id = 0; id < bytes.size() && static_cast<int64_t>(id) < tokenizer.vocab_size(); ++id)
    if (!special[id]) bytes[id] = std::string(tokenizer.token_bytes(static_cast<int32_t>(id)));
  return std::make_shared<constrain::Vocabulary>(std::move(bytes), tokenizer.stop_tokens());
}

}  // namespace sb
