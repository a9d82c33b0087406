#include <string>

#include <fmt/format.h>

#include "input_error.hpp"
#include "replay.hpp"

namespace specbench {

namespace {

template <class File>
std::shared_ptr<const File> open_once(std::shared_ptr<const File>& cache, const std::filesystem::path& path,
                                      const char* drafter, const char* option) {
  if (path.empty())
    throw input_error(fmt::format("the drafter {} needs {} FILE (see docs/drafters.md)", drafter, option));
  if (!cache) {
    try {
      cache = std::make_shared<const File>(path);
    } catch (const specdec::error& e) {
      throw input_error(e.what());
    }
  }
  return cache;
}

void check_vocabulary(int datastore_vocab, const std::filesystem::path& path, const TargetInfo& target) {
  if (datastore_vocab > target.vocab_size)
    throw input_error(fmt::format("datastore {} has vocabulary size {}, larger than the target's {} (built for another "
                                  "tokenizer?)",
                                  path.string(), datastore_vocab, target.vocab_size));
}

}  // namespace

std::shared_ptr<const specdec::TokenDatastore> DrafterResources::token_datastore(const TargetInfo& target) const {
  auto ds = open_once(token_datastore_, datastore, "rest", "a token datastore: --datastore");
  check_vocabulary(ds->vocab_size(), datastore, target);
  return ds;
}

std::shared_ptr<const specdec::DenseDatastore> DrafterResources::dense(const TargetInfo& target) const {
  auto ds = open_once(dense_, dense_datastore, "dresd", "a dense datastore: --dense-datastore");
  check_vocabulary(ds->vocab_size(), dense_datastore, target);
  if (target.model && ds->feature_dim() != target.model->config().dim)
    throw input_error(fmt::format("dense datastore {} holds features of {} floats, but the model's are {} (built "
                                  "for another model?)",
                                  dense_datastore.string(), ds->feature_dim(), target.model->config().dim));
  return ds;
}

std::shared_ptr<const specdec::Llama2cModel> DrafterResources::draft(const TargetInfo& target) const {
  if (!draft_) {
    // The header first: a model that does not fit the target is refused before its weights are read.
    specdec::LlamaConfig config;
    try {
      config = specdec::Llama2cModel::read_config(draft_model);
    } catch (const specdec::error& e) {
      throw input_error(fmt::format("--draft-model: {}", e.what()));
    }
    if (config.vocab_size != target.vocab_size)
      throw input_error(fmt::format("draft model {} has a vocabulary of {} tokens, the target's has {} (a draft model "
                                    "needs the target's tokenizer)",
                                    draft_model.string(), config.vocab_size, target.vocab_size));
    if (target.model && config.seq_len < target.model->config().seq_len)
      throw input_error(fmt::format("draft model {} has {} positions, fewer than the target's {} (it must read "
                                    "every sequence the target does)",
                                    draft_model.string(), config.seq_len, target.model->config().seq_len));
    try {
      draft_ = std::make_shared<const specdec::Llama2cModel>(specdec::Llama2cModel::load(draft_model));
    } catch (const specdec::error& e) {
      throw input_error(fmt::format("--draft-model: {}", e.what()));
    }
  }
  return draft_;
}

std::shared_ptr<const specdec::NgramModel> DrafterResources::ngram_model(const TargetInfo& target) const {
  auto model = open_once(ngram_, ngram, "ngram (and staged)", "an n-gram model: --ngram");
  if (model->vocab_size() != target.vocab_size)
    throw input_error(fmt::format("n-gram model {} has a vocabulary of {} tokens, the target's has {} (built for "
                                  "another tokenizer? specdec-ngram build --vocab sets it)",
                                  ngram.string(), model->vocab_size(), target.vocab_size));
  return model;
}

std::shared_ptr<const specdec::DenseSearch> DrafterResources::dense_search(const TargetInfo& target) const {
  const auto ds = dense(target);
  if (!dense_search_) {
    try {
      dense_search_ = specdec::tools::make_dense_search(ds, dresd_search);
    } catch (const specdec::error& e) {
      throw input_error(std::string("--dresd-search: ") + e.what());
    }
  }
  return dense_search_;
}

std::string DrafterResources::dense_search_used() const {
  return dense_search_ ? specdec::tools::describe(dresd_search) : std::string();
}

}  // namespace specbench
