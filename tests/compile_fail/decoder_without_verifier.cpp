// Must not compile: two drafters and no verifier (issue 19). The expected error says the last
// argument must be the verifier, instead of telling CasdDrafter it lacks `needs`.
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/testing/hash_target.hpp>

struct MyDrafter {
  void begin(std::span<const specdec::token_t>) {}
  void propose(const specdec::DraftContext&, specdec::DraftTree&) {}
  void observe(std::span<const specdec::token_t>) {}
};

int main() {
  specdec::HashTarget target;
  specdec::SpeculativeDecoder<specdec::HashTarget, MyDrafter, specdec::CasdDrafter> decoder(target);
  decoder.prefill(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(decoder.generate(4).size());
}
