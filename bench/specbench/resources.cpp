#include <string>

#include "input_error.hpp"
#include "replay.hpp"

namespace specbench {

std::shared_ptr<const specdec::TokenDatastore> DrafterResources::datastore(int vocab_size) const {
  if (datastore_path_.empty())
    throw input_error("the drafter rest needs a token datastore: --datastore FILE (see docs/drafters.md, REST)");
  if (!datastore_) {
    try {
      datastore_ = std::make_shared<const specdec::TokenDatastore>(datastore_path_);
    } catch (const specdec::error& e) {
      throw input_error(e.what());
    }
  }
  if (datastore_->vocab_size() > vocab_size)
    throw input_error("token datastore " + datastore_path_.string() + " has vocabulary size " +
                      std::to_string(datastore_->vocab_size()) + ", larger than the target's " + std::to_string(vocab_size) +
                      " (built for another tokenizer?)");
  return datastore_;
}

}  // namespace specbench
