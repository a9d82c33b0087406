// The Python module `specdec`: the drafters (drafters.cpp), the merged tree, the verifiers and
// the automatic budget, for an inference loop whose target runs in Python (a PyTorch model).
// A thin binding over Session (session.hpp): arrays in and out, no per-node Python objects.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <specdec/testing/laid_out_tree.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "arrays.hpp"
#include "session.hpp"
#include "tasks.hpp"

namespace specdec::python {

void bind_drafters(py::module_& m);  // drafters.cpp

namespace {

/// A verifier as Python holds it; the three kinds are its subclasses.
struct VerifierSpec {
  AnyVerifier verifier;
};
struct GreedySpec : VerifierSpec {};
struct RejectionSpec : VerifierSpec {};
struct ConditionalSpec : VerifierSpec {};

/// The tree of a step as NumPy arrays (copies: a tree is small, and the arrays outlive the step).
struct TreeArrays {
  py::array_t<std::int32_t> tokens, parents, depths, positions, first_child, next_sibling;
  py::array_t<std::uint32_t> sources;     // bit d: drafter d proposed the node
  py::array_t<bool> mask;                 // [n, n]: mask[i, j] = node i attends to node j
  py::array_t<std::uint32_t> mask_bits;   // [n, ceil(n / 32)]: bit j % 32 of word j / 32
  int base_position = 0;
  int size = 0;
};

TreeArrays tree_arrays(const TreeView& view, std::span<const std::uint32_t> sources) {
  const auto n = static_cast<std::size_t>(view.size);
  TreeArrays t;
  t.size = view.size;
  t.base_position = view.base_position;
  t.tokens = numpy_copy(view.token, n);
  t.parents = numpy_copy(view.parent, n);
  t.depths = numpy_copy(view.depth, n);
  t.first_child = numpy_copy(view.first_child, n);
  t.next_sibling = numpy_copy(view.next_sibling, n);
  t.positions = py::array_t<std::int32_t>(static_cast<py::ssize_t>(n));
  for (std::size_t i = 0; i < n; ++i) t.positions.mutable_data()[i] = view.position(static_cast<int>(i));
  t.sources = numpy_copy(sources.data(), n);
  const auto words = static_cast<std::size_t>(view.words_per_row);
  t.mask_bits = py::array_t<std::uint32_t>({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(words)});
  std::copy(view.mask, view.mask + n * words, t.mask_bits.mutable_data());
  t.mask = py::array_t<bool>({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(n)});
  bool* m = t.mask.mutable_data();
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) m[i * n + j] = view.attends(static_cast<int>(i), static_cast<int>(j));
  return t;
}

/// A verdict as Python reads it.
struct VerdictArrays {
  py::array_t<std::int32_t> path;    // accepted nodes, root first: the tree slots whose K/V to keep
  py::array_t<std::int32_t> tokens;  // committed tokens: the accepted draft tokens, then the next token
  int next_token = -1;
};

VerdictArrays verdict_arrays(const TreeView& view, const Verdict& verdict) {
  VerdictArrays v;
  v.path = numpy_copy(verdict.path.data(), verdict.path.size());
  v.tokens = py::array_t<std::int32_t>(static_cast<py::ssize_t>(verdict.path.size()));
  std::int32_t* out = v.tokens.mutable_data();
  for (std::size_t k = 1; k < verdict.path.size(); ++k) out[k - 1] = view.token[verdict.path[k]];
  out[verdict.path.size() - 1] = verdict.next_token;
  v.next_token = verdict.next_token;
  return v;
}

/// Features of `rows` rows (any width) from an array or tensor, read in place while `held` lives;
/// none for None.
FeatureRows features_of(py::handle obj, int rows, HostRows& held) {
  if (obj.is_none()) return {};
  held = host_rows(obj, "features", rows, -1);
  return {held.data, held.row_stride, rows, held.cols};
}

/// The Decoder: a Session, and the buffers of a verification on a CUDA device.
struct PyDecoder : Session {
  using Session::Session;
#if defined(SPECDEC_PYTHON_CUDA)
  DeviceVerifier device;  // allocates on its first CUDA verification
#endif
};

std::unique_ptr<PyDecoder> make_decoder(int vocab, std::vector<std::shared_ptr<AnyDrafter>> drafters,
                                        const VerifierSpec& verifier, int budget, int max_positions,
                                        const py::object& cost, bool measured_pause, const py::object& clock) {
  SessionOptions options{budget, max_positions, {}, measured_pause, {}};
  if (!cost.is_none()) {
    if (is_torch_tensor(cost) || py::isinstance<py::str>(cost))
      throw error("cost must be a list or NumPy array of seconds, got " + type_name(cost));
    options.cost = py::cast<std::vector<double>>(cost);
  }
  if (!clock.is_none()) {
    if (!PyCallable_Check(clock.ptr())) throw error("clock must be a callable that returns seconds, got " + type_name(clock));
    // Called while the decoder runs without the GIL (draft, verify): it takes it back to call.
    options.clock = [clock]() {
      py::gil_scoped_acquire hold;
      return clock().cast<double>();
    };
  }
  return std::make_unique<PyDecoder>(vocab, std::move(drafters), verifier.verifier, std::move(options));
}

/// Verifies against `logits` wherever they are, without the GIL: on the host, or with the CUDA
/// kernels on the logits' device (`device`: the DeviceVerifier keeping the buffers). `verify`
/// is called with a run(verifier, tree, verdict) that does it.
template <class Verify>
void verify_where(const LogitsInput& logits, [[maybe_unused]] void* device, Verify&& verify) {
  py::gil_scoped_release free;  // the logits are held by `logits`
  if (!logits.on_device) {
    const HostRows& h = logits.host;
    verify([&](AnyVerifier& v, const TreeView& t, Verdict& out) {
      verify_tree(v, t, RowMajorLogits{h.data, h.row_stride, t.size, h.cols}, out);
    });
    return;
  }
#if defined(SPECDEC_PYTHON_CUDA)
  verify([&](AnyVerifier& v, const TreeView& t, Verdict& out) {
    static_cast<DeviceVerifier*>(device)->verify(v, t, logits.device, out);
  });
#endif
}

/// Verifies a tree given as arrays (an engine's own tree): node 0 the root, parents before children.
VerdictArrays verify_arrays(py::handle parents_obj, py::handle tokens_obj, py::handle logits_obj,
                            VerifierSpec& verifier, int base_position) {
  const std::vector<node_t> parents = ints_from(parents_obj, "parents", -1);
  const std::vector<token_t> tokens = tokens_from(tokens_obj, "tokens");
  if (parents.size() != tokens.size() || tokens.empty())
    throw error("parents and tokens have " + std::to_string(parents.size()) + " and " + std::to_string(tokens.size()) +
                " entries: need one per tree node, the root included");
  if (base_position < 0) throw error("base_position must be >= 0, got " + std::to_string(base_position));
  const LogitsInput logits = logits_rows(logits_obj, static_cast<int>(tokens.size()), -1);
  const int vocab = logits.on_device ? logits.device.cols : logits.host.cols;
  if (parents[0] != -1) throw error("parents[0] is " + std::to_string(parents[0]) + ", the root's must be -1");
  DraftTree tree;
  tree.reset(tokens[0]);
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    if (parents[i] < 0 || parents[i] >= static_cast<node_t>(i))
      throw error("parents[" + std::to_string(i) + "] is " + std::to_string(parents[i]) +
                  ": a parent must come before its child");
    tree.add(parents[i], tokens[i]);
  }
  check_tree(tree, vocab, "tree");
  const testing::LaidOutTree laid(parents, tokens);
  const TreeView view = laid.view(base_position);
  Verdict verdict;
#if defined(SPECDEC_PYTHON_CUDA)
  DeviceVerifier device;  // buffers for this call only: a Decoder keeps its own
  void* const buffers = &device;
#else
  void* const buffers = nullptr;
#endif
  verify_where(logits, buffers, [&](auto&& run) { run(verifier.verifier, view, verdict); });
  return verdict_arrays(view, verdict);
}

}  // namespace
}  // namespace specdec::python

PYBIND11_MODULE(specdec, m) {
  using namespace specdec;
  using namespace specdec::python;
  m.doc() = "Speculative decoding's drafters and verifiers for an inference loop in Python (docs/python.md)";
  py::register_exception<error>(m, "Error", PyExc_ValueError);

  py::class_<VerifierSpec>(m, "Verifier", "A verifier: Greedy, RejectionSampling or Conditional");
  py::class_<GreedySpec, VerifierSpec>(m, "Greedy", "Greedy verification: lossless, the target's greedy output")
      .def(py::init([] { return GreedySpec{{ExactVerifier{}}}; }));
  py::class_<RejectionSpec, VerifierSpec>(m, "RejectionSampling",
                                          "Lossless speculative sampling (Philox keyed by seed, sequence and position)")
      .def(py::init([](float temperature, int top_k, float top_p, float min_p, std::uint64_t seed, std::uint32_t sequence) {
             return RejectionSpec{{RejectionSampling(SamplingOptions{{temperature, top_k, top_p, min_p}, seed, sequence})}};
           }),
           py::kw_only(), py::arg("temperature") = 1.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
           py::arg("min_p") = 0.0f, py::arg("seed") = 0, py::arg("sequence") = 0);
  py::class_<ConditionalSpec, VerifierSpec>(m, "Conditional", "CASD's conditional verification (lossy)")
      .def(py::init([](int eos, float delta, int top_k, float temperature, std::uint64_t seed, std::uint32_t sequence) {
             return ConditionalSpec{{ConditionalVerifier(ConditionalParams{delta, top_k, eos},
                                                         SamplingOptions{{temperature}, seed, sequence})}};
           }),
           py::kw_only(), py::arg("eos"), py::arg("delta") = 0.1f, py::arg("top_k") = 0, py::arg("temperature") = 0.0f,
           py::arg("seed") = 0, py::arg("sequence") = 0);
  m.attr("NO_EOS") = core::kNoEos;

  py::class_<TreeArrays>(m, "Tree", "A step's merged draft tree, laid out (NumPy arrays, node 0 the root)")
      .def_readonly("tokens", &TreeArrays::tokens)
      .def_readonly("parents", &TreeArrays::parents, "parent of each node (-1 for the root), parents first")
      .def_readonly("depths", &TreeArrays::depths)
      .def_readonly("positions", &TreeArrays::positions, "sequence position of each node: base_position + depth")
      .def_readonly("sources", &TreeArrays::sources, "bit d set: drafter d proposed the node")
      .def_readonly("first_child", &TreeArrays::first_child, "each node's first child, -1 when none")
      .def_readonly("next_sibling", &TreeArrays::next_sibling, "each node's next sibling (increasing index), -1 when none")
      .def_readonly("mask", &TreeArrays::mask, "bool [n, n]: node i attends to node j (j is i or an ancestor)")
      .def_readonly("mask_bits", &TreeArrays::mask_bits, "uint32 [n, ceil(n/32)]: the mask packed, bit j%32 of word j//32")
      .def_readonly("base_position", &TreeArrays::base_position, "tokens in the target's KV cache: the root's position")
      .def("__len__", [](const TreeArrays& t) { return t.size; });

  py::class_<VerdictArrays>(m, "Verdict", "What the verifier accepted")
      .def_readonly("path", &VerdictArrays::path,
                    "accepted nodes, root first: keep the K/V of tree node path[k] at position base_position + k")
      .def_readonly("tokens", &VerdictArrays::tokens, "committed tokens: the accepted draft tokens, then the next token")
      .def_readonly("next_token", &VerdictArrays::next_token, "the token after the path (the next step's root)")
      .def_property_readonly("accepted", [](const VerdictArrays& v) { return v.path.size() - 1; },
                             "draft tokens accepted");

  py::class_<DecodeStats>(m, "Stats", "Counters since begin(); τ counts the bonus token (Spec-Bench's convention)")
      .def_readonly("steps", &DecodeStats::steps)
      .def_readonly("tokens", &DecodeStats::tokens)
      .def_readonly("drafted_nodes", &DecodeStats::drafted_nodes)
      .def_property_readonly("tau", &DecodeStats::tau)
      .def_property_readonly("nodes_per_step", &DecodeStats::draft_nodes_per_step)
      .def_readonly("draft_seconds", &DecodeStats::draft_seconds, "drafting, merge, layout and observe")
      .def_readonly("verify_seconds", &DecodeStats::verify_seconds)
      .def_readonly("tokens_per_step", &DecodeStats::tokens_per_step)
      .def_readonly("accepted_by_drafter", &DecodeStats::accepted_by_drafter)
      .def_readonly("drafter_names", &DecodeStats::drafter_names)
      .def_readonly("sized_steps", &DecodeStats::sized_steps)
      .def_readonly("paused_steps", &DecodeStats::paused_steps, "steps the automatic budget's pause sent the root alone")
      .def_readonly("expected_tokens", &DecodeStats::expected_tokens);

  bind_drafters(m);

  py::class_<PyDecoder>(m, "Decoder",
                      "One sequence's speculative decoding with your model as the target: begin, then per step "
                      "draft -> (your forward of the tree) -> verify -> commit")
      .def(py::init(&make_decoder), py::arg("vocab_size"), py::arg("drafters") = std::vector<std::shared_ptr<AnyDrafter>>{},
           py::kw_only(), py::arg("verifier") = GreedySpec{{ExactVerifier{}}}, py::arg("budget") = 64,
           py::arg("max_positions") = 0, py::arg("cost") = py::none(), py::arg("measured_pause") = true,
           py::arg("clock") = py::none())
      .def("begin", [](PyDecoder& s, py::handle prompt, py::handle features) {
             const std::vector<token_t> tokens = tokens_from(prompt, "prompt");
             HostRows held;
             s.begin(tokens, features_of(features, static_cast<int>(tokens.size()) - 1, held));
           }, py::arg("prompt"), py::arg("features") = py::none(),
           "Starts a sequence: prompt's last token is the first root (your cache holds the others); features "
           "(for EAGLE, DReSD): your model's last hidden states, one row per prompt token but the last")
      .def("draft", [](PyDecoder& s) {
             TreeView view;
             {
               py::gil_scoped_release free;  // drafting reads no Python object (a draft model may take a while)
               view = s.draft();
             }
             return tree_arrays(view, s.tree().sources());
           })
      .def("verify", [](PyDecoder& s, py::handle logits, py::handle features) {
             s.require_drafted("verify");
             const LogitsInput rows = logits_rows(logits, s.view().size, s.vocab());
             HostRows held;
             const FeatureRows feature_rows = features_of(features, s.view().size, held);
#if defined(SPECDEC_PYTHON_CUDA)
             void* const buffers = &s.device;
#else
             void* const buffers = nullptr;
#endif
             verify_where(rows, buffers, [&](auto&& run) { s.verify_by(run, feature_rows); });
             return verdict_arrays(s.view(), s.verdict());
           }, py::arg("logits"), py::arg("features") = py::none(),
           "logits: [tree nodes, vocab] float32, row i after node i: NumPy or a CPU tensor (verified on the host), or "
           "a CUDA tensor / __cuda_array_interface__ (verified on its device, on its stream); features (for EAGLE, "
           "DReSD): your model's last hidden state at each node, in host memory")
      .def("accept", [](PyDecoder& s, py::handle path, int next_token, py::handle features) {
             s.require_drafted("accept");
             const std::vector<node_t> nodes = ints_from(path, "path", 0);
             HostRows held;
             return verdict_arrays(s.view(), s.accept(nodes, next_token, features_of(features, s.view().size, held)));
           }, py::arg("path"), py::arg("next_token"), py::arg("features") = py::none(),
           "A verdict reached elsewhere (a serving engine's sampler): accepted nodes, root first, and the next token")
      .def("commit", [](PyDecoder& s, std::optional<double> step_seconds) {
             const auto committed = s.commit(step_seconds);
             return numpy_copy(committed.data(), committed.size());
           }, py::arg("step_seconds") = py::none(),
           "Commits the verdict; step_seconds: the step's seconds from draft() to now as you measured them, for "
           "the automatic budget's measured pause (default: the decoder's clock)")
      .def("end", &PyDecoder::end)
      .def_property_readonly("context", [](const PyDecoder& s) { return numpy_copy(s.context().data(), s.context().size()); })
      .def_property_readonly("cached", &PyDecoder::cached, "tokens in the target's KV cache: the context but the root")
      .def_property_readonly("vocab_size", &PyDecoder::vocab)
      .def_property_readonly("stats", &PyDecoder::stats, py::return_value_policy::copy);

  m.def("verify", &verify_arrays, py::arg("parents"), py::arg("tokens"), py::arg("logits"), py::arg("verifier"),
        py::kw_only(), py::arg("base_position") = 0,
        "Verifies a tree given as arrays (e.g. a serving engine's): logits row i is the target's after node i");

  py::class_<Llama2cTokenizer>(m, "Tokenizer", "A llama2.c tokenizer.bin (e.g. tok512.bin for stories260K)")
      .def(py::init([](const std::filesystem::path& path) { return Llama2cTokenizer::load(path); }), py::arg("path"))
      .def("encode", [](const Llama2cTokenizer& t, const std::string& text, bool bos) {
             const auto ids = t.encode(text, bos);
             return numpy_copy(ids.data(), ids.size());
           }, py::arg("text"), py::arg("bos") = true)
      .def("decode", [](const Llama2cTokenizer& t, py::handle ids) { return t.decode(tokens_from(ids, "tokens")); })
      .def_property_readonly("vocab_size", &Llama2cTokenizer::vocab_size)
      .def_readonly_static("bos", &Llama2cTokenizer::bos)
      .def_readonly_static("eos", &Llama2cTokenizer::eos);

  m.def("tasks", [] {
    py::dict out;
    for (const specbench::Task& t : specbench::builtin_tasks()) out[py::str(t.name)] = t.prompts;
    return out;
  }, "specbench's prompt sets for TinyStories models ({name: [prompt, ...]}; bench/specbench/tasks.cpp)");
}
