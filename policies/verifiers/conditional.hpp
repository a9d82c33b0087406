// ConditionalVerifier: CASD's conditional verification (lossy by design).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/concepts.hpp>
#include <specdec/core/conditional.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/error.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>

namespace specdec {

using core::ConditionalParams;

/// Accepts a draft token when the target finds it likely enough: p(x) > max(delta, p(eos)), with
/// p the target's softmax after its parent (temperature 1); in the mixed mode (top_k > 0) x must
/// also be among the target's top_k tokens (the paper's defaults: delta = 0.1, top_k = 5). A
/// node's children are considered only when it was accepted; the deepest accepted node wins
/// (ties: the lowest node index, i.e. the earliest proposed). The next token is the target's
/// choice after it: greedy at temperature 0, else drawn with the sampling front end.
///
/// LOSSY: the output is NOT distributed as the target's (nor equal to its greedy output); it
/// trades fidelity for longer accepted drafts (τ grows as delta falls). Use RejectionSampling or
/// ExactVerifier when the output must be the target's.
class ConditionalVerifier {
 public:
  static constexpr output_need needs = output_need::logits;

  /// `params.eos` is required: the target's end-of-sequence token, or core::kNoEos for a target
  /// that has none (there is no default constructor, and an unset eos is refused, since it would
  /// silently turn off the paper's EOS guard). `next` samples the token after the accepted path
  /// (temperature 0: greedy).
  explicit ConditionalVerifier(ConditionalParams params, SamplingOptions next = {SamplingParams{0.0f}, 0, 0})
      : params_(params), next_(next) {
    if (params.eos == core::kEosUnset)
      throw error("ConditionalVerifier: the EOS token is required (CASD accepts x only when p(x) > p(eos)): set "
                  "ConditionalParams::eos to the target's, or to core::kNoEos for a target without one");
    if (!(params.delta >= 0.0f && params.delta <= 1.0f) || params.top_k < 0 || params.eos < core::kNoEos)
      throw error("ConditionalVerifier: need 0 <= delta <= 1, top_k >= 0, eos >= 0 (or core::kNoEos); got delta " +
                  std::to_string(params.delta) + ", top_k " + std::to_string(params.top_k) + ", eos " +
                  std::to_string(params.eos));
    detail::check_sampling(next.sampling, "ConditionalVerifier");
  }

  template <LogitsOutput Out>
  void verify(const TreeView& tree, const Out& out, Verdict& verdict) {
    const int vocab = static_cast<int>(out.logits(0).size());
    check_eos(vocab);
    accepted_.resize(static_cast<std::size_t>(tree.size));
    work_.resize(static_cast<std::size_t>(vocab));
    verdict.path.resize(static_cast<std::size_t>(tree.max_depth) + 1);
    core::sampling_status status{};
    node_t bad = -1;
    const int length = core::conditional_walk(
        tree, vocab, [&](node_t node) { return out.logits(node).data(); }, params_, accepted_.data(),
        verdict.path.data(), &status, &bad);
    if (status != core::sampling_status::ok) detail::throw_bad_row(status, bad, "ConditionalVerifier");
    verdict.path.resize(static_cast<std::size_t>(length));
    const node_t last = verdict.path.back();
    verdict.next_token = core::sample_token(out.logits(last).data(), vocab, next_.sampling,
                                            core::RandomKey{next_.seed, next_.sequence}, tree.position(last) + 1,
                                            work_.data(), &status);
    if (status != core::sampling_status::ok) detail::throw_bad_row(status, last, "ConditionalVerifier");
  }

  /// The same verification in a backend's memory (a BackendTarget's step).
  template <class Backend>
  backend::status verify_on(const Backend& tag, const backend::VerifyJob& job) const {
    check_eos(job.stochastic.vocab_size);
    return backend::conditional_verify(tag, job.stochastic, params_, next_.sampling);
  }
  /// The random stream the next token is drawn from.
  core::RandomKey random_key() const { return {next_.seed, next_.sequence}; }

 private:
  void check_eos(int vocab) const {
    if (params_.eos >= vocab)
      throw error("ConditionalVerifier: eos token " + std::to_string(params_.eos) + " outside the vocabulary [0, " +
                  std::to_string(vocab) + ")");
  }

  ConditionalParams params_{};
  SamplingOptions next_{SamplingParams{0.0f}, 0, 0};
  std::vector<std::uint8_t> accepted_;
  std::vector<float> work_;
};

static_assert(Verifier<ConditionalVerifier>);

}  // namespace specdec
