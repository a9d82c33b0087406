// RejectionSampling: lossless speculative sampling of chains and trees.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/concepts.hpp>
#include <specdec/core/rejection.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/error.hpp>

namespace specdec {

using core::SamplingParams;

/// Options of the stochastic verifiers.
struct SamplingOptions {
  SamplingParams sampling{};   ///< temperature, top-k, top-p, min-p
  std::uint64_t seed = 0;      ///< a run is reproducible from its seed
  std::uint32_t sequence = 0;  ///< the request's id: different sequences draw independent numbers
};

namespace detail {
inline void check_sampling(const SamplingParams& params, const char* who) {
  if (!core::valid(params)) {
    throw error(std::string(who) + ": bad sampling parameters: temperature " + std::to_string(params.temperature) +
                " (>= 0), top_k " + std::to_string(params.top_k) + " (>= 0), top_p " + std::to_string(params.top_p) +
                " (in (0, 1]), min_p " + std::to_string(params.min_p) + " (in [0, 1])");
  }
}
[[noreturn]] inline void throw_bad_row(core::sampling_status status, node_t node, const char* who) {
  throw error(std::string(who) + ": the target's logits row after node " + std::to_string(node) +
              " is unusable: " + core::to_string(status));
}
}  // namespace detail

/// Verifies a draft tree so that the committed tokens are distributed exactly as sampling the
/// target token by token with `options.sampling` (Leviathan et al. 2023 for chains; SpecInfer's
/// multi-draft rule for several children per node). Draft tokens a drafter sampled and declared
/// with DraftTree::add_sampled are tested against that q (accept with probability min(1, p/q));
/// every other draft token is a fixed proposal (accept with probability p). After each rejection
/// the target distribution becomes the residual, and the next token is drawn from the last one.
/// See core::rejection_walk for the order of the tests. Temperature 0 gives the ExactVerifier's
/// output. Random numbers come from Philox keyed by (seed, sequence, position, purpose).
class RejectionSampling {
 public:
  static constexpr output_need needs = output_need::logits;

  RejectionSampling() = default;
  explicit RejectionSampling(SamplingOptions options) : options_(options) {
    detail::check_sampling(options.sampling, "RejectionSampling");
  }

  template <LogitsOutput Out>
  void verify(const TreeView& tree, const Out& out, Verdict& verdict) {
    const int vocab = static_cast<int>(out.logits(0).size());
    work_.resize(static_cast<std::size_t>(vocab));
    verdict.path.resize(static_cast<std::size_t>(tree.max_depth) + 1);
    core::sampling_status status{};
    node_t bad = -1;
    const int length = core::rejection_walk(
        tree, vocab, [&](node_t node) { return out.logits(node).data(); }, options_.sampling,
        core::RandomKey{options_.seed, options_.sequence}, work_.data(), verdict.path.data(), &verdict.next_token,
        &status, &bad);
    if (status != core::sampling_status::ok) detail::throw_bad_row(status, bad, "RejectionSampling");
    verdict.path.resize(static_cast<std::size_t>(length));
  }

  /// The same verification in a backend's memory (a BackendTarget's step).
  template <class Backend>
  backend::status verify_on(const Backend& tag, const backend::VerifyJob& job) const {
    return backend::rejection_verify(tag, job.stochastic, options_.sampling);
  }
  /// The random stream the verification draws from.
  core::RandomKey random_key() const { return {options_.seed, options_.sequence}; }
  /// One verify_on call verifies both verifiers' trees (each with its own random key): a batch
  /// on a backend verifies requests with equal sampling parameters together.
  bool verifies_on_like(const RejectionSampling& other) const {
    const SamplingParams& a = options_.sampling;
    const SamplingParams& b = other.options_.sampling;
    return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p;
  }

  const SamplingOptions& options() const { return options_; }

 private:
  SamplingOptions options_{};
  std::vector<float> work_;
};

static_assert(Verifier<RejectionSampling>);

}  // namespace specdec
