// Must not compile: a sampling verifier needs full rows of logits, and ReplayTarget's output only
// knows its argmax. The expected error is the sentence from specdec::detail::check_verifier.
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/replay_target.hpp>

int main() {
  specdec::ReplayTarget target(std::vector<specdec::token_t>{1, 2}, /*vocab_size=*/4, /*stop_token=*/2);
  specdec::SpeculativeDecoder<specdec::ReplayTarget, specdec::RejectionSampling> decoder(target);
  (void)decoder;
}
