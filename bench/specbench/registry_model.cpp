// Every registered combination (combinations.hpp) compiled for `specbench model`, once per
// verifier: SpeculativeDecoder<Llama2cTarget, Drafters..., Verifier>.
#include "combinations.hpp"
#include "model.hpp"
#include "registry.hpp"

namespace specbench {

namespace {

template <class... Drafters>
ModelRunners model_runners_of(specdec::detail::type_list<Drafters...>) {
  return {&decode_model<specdec::ExactVerifier, Drafters...>, &decode_model<specdec::RejectionSampling, Drafters...>,
          &decode_model<specdec::ConditionalVerifier, Drafters...>};
}

template <class... Lists>
std::vector<ModelRunners> all_model_runners(specdec::detail::type_list<Lists...>) {
  return {model_runners_of(Lists{})...};
}

}  // namespace

const std::vector<ModelRunners>& model_runners() {
  static const std::vector<ModelRunners> list = all_model_runners(registered_combinations{});
  return list;
}

}  // namespace specbench
