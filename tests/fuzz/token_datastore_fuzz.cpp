// Fuzz target: token datastores (index/token_datastore.hpp), checksums recomputed as an attacker
// would. Opened with the header check only, a file must still be memory-safe to query and to
// draft from with REST, and REST drafts only tokens of the vocabulary; with the full check,
// every stored value is valid. Anything but a specdec::error is a bug.
#include <cstdlib>
#include <memory>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/token_datastore.hpp>
#include <specdec/policies/drafters/rest.hpp>

#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = specdec::fuzz::as_file(specdec::fuzz::sealed<specdec::DatastoreHeader>(data, size), ".sdtok");
  for (const auto verify :
       {specdec::DatastoreVerify::header, specdec::DatastoreVerify::values, specdec::DatastoreVerify::full}) {
    try {
      const auto ds = std::make_shared<const specdec::TokenDatastore>(file, verify);
      const std::uint32_t first = ds->text()[0];
      const std::vector<std::uint32_t> queries[] = {{0}, {1, 2}, {first}, {0xFFFFFFFEu, 3}};
      for (const auto& q : queries) (void)ds->find(q);
      specdec::RestDrafter rest(ds, {.min_suffix = 1});
      const std::vector<specdec::token_t> context{0, 1, 2, static_cast<specdec::token_t>(first & 0x7FFFFFFF)};
      specdec::DraftTree tree;
      tree.reset(context.back());
      rest.begin(context);
      rest.propose(specdec::DraftContext{context, 0, 16, 4, ds->vocab_size()}, tree);
      for (int i = 1; i < tree.size(); ++i)
        if (tree.token(i) < 0 || tree.token(i) >= ds->vocab_size()) std::abort();  // a token outside the vocabulary
    } catch (const specdec::error&) {
    }
  }
  return 0;
}
