// The real stories260K model and its tokenizer from the data directory, loaded once per test
// program; null (after a "specdec-skip:" line, see data.hpp) when the files are absent.
#pragma once

#include <memory>

#include <specdec/models/llama2c_model.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/data.hpp"

namespace specdec::testing {

struct Stories260K {
  std::shared_ptr<const Llama2cModel> model;
  Llama2cTokenizer tokenizer;
};

inline const Stories260K* stories260k() {
  static const std::unique_ptr<const Stories260K> loaded = []() -> std::unique_ptr<const Stories260K> {
    const auto model_path = data_file("models/stories260K.bin");
    const auto tok_path = data_file("models/tok512.bin");
    if (!model_path || !tok_path) return nullptr;
    auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(*model_path));
    auto tokenizer = Llama2cTokenizer::load(*tok_path, model->config().vocab_size);
    return std::make_unique<const Stories260K>(Stories260K{std::move(model), std::move(tokenizer)});
  }();
  return loaded.get();
}

}  // namespace specdec::testing
