// specbench: replays real greedy LLM answers (replay, compare) or decodes with a real llama2.c model
// (model) with drafter combinations, and reports τ, drafting cost, which drafter earned the
// accepted tokens and, for a model, the speed next to plain decoding; with --batch, many requests at
// once, plain and speculative side by side per batch size. See docs/specbench.md.
#include <algorithm>
#include <cstdint>
#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "batch.hpp"
#include "calibrate.hpp"
#include "chat_template.hpp"
#include "common/cli_checks.hpp"
#include "common/cli_values.hpp"
#include "common/dense_search_options.hpp"
#include "corpus.hpp"
#include "cost_report.hpp"
#include "cost_table.hpp"
#include "costers.hpp"
#include "device.hpp"
#include "device_cli.hpp"
#include "input_error.hpp"
#include "registry.hpp"
#include "report.hpp"
#include "resource_paths.hpp"
#include "story_corpus.hpp"
#include "tasks.hpp"

namespace fs = std::filesystem;
using namespace specbench;
using specdec::tools::number_in;
using specdec::tools::one_of;
using specdec::tools::whole_number_at_least;
using specdec::tools::whole_number_in;

namespace {

/// The drafters' files and options as the command line starts them: the EAGLE head and the draft
/// model default to the installed ones, else the source tree's (resource_paths.hpp).
DrafterResources default_resources() {
  DrafterResources r;
  r.eagle_head = default_resource(SPECDEC_INSTALLED_EAGLE_HEAD, SPECDEC_DEFAULT_EAGLE_HEAD);
  r.draft_model = default_resource(SPECDEC_INSTALLED_DRAFT_MODEL, SPECDEC_DEFAULT_DRAFT_MODEL);
  return r;
}

/// `--budget N|auto` and `--budget-cap N`.
struct BudgetArgs {
  int budget = 64;
  bool automatic = false;
  int cap = 64;
  const CLI::Option* budget_option = nullptr;  ///< --budget, to tell whether it was given
  const CLI::Option* cap_option = nullptr;     ///< --budget-cap, to tell whether it was given
  /// What the decoder's DecoderOptions::budget gets: the fixed budget, or the automatic one's cap.
  int most() const { return automatic ? cap : budget; }
  /// A fixed budget that no --budget asked for.
  bool fixed_by_default() const { return !automatic && budget_option->count() == 0; }
  /// The rules of --budget and --budget-cap (a subcommand's rules call it): without --budget, the
  /// budget is automatic where the command has a cost model at hand and fixed (at 64) where it has
  /// none; --budget-cap is refused next to a fixed budget.
  void settle(bool cost_model_at_hand) {
    if (budget_option->count() == 0) automatic = cost_model_at_hand;
    if (cap_option->count() > 0 && !automatic)
      throw input_error(fixed_by_default() ? "--budget-cap applies to --budget auto only, the default where a cost "
                                             "model is at hand: give --cost TABLE or --timed-model M"
                                           : "--budget-cap applies to --budget auto only");
  }
};

struct DataArgs {
  std::string data_dir;
  std::string questions;
  std::string answers;
  std::string tokenizer;
  std::string template_name = "vicuna";
  std::string template_file;
  std::vector<std::string> categories;
  int max_turns = 0;
  std::string parity;
  DrafterResources drafters = default_resources();
  BudgetArgs budget;
  std::string json;
  int sample = 0;            ///< --turns: a fixed subsample of this many turns
  bool warm_history = false; ///< --warm-history: the turns --turns leaves out still pass through the drafters
  std::string cost;          ///< --cost TABLE: modelled time
  std::string plot;          ///< replay: the histogram; compare: tau (and speedup) per category
};

/// The options of `replay` beyond the data's.
struct ReplayArgs {
  std::vector<std::string> drafters;
  std::string timed_model;   ///< --timed-model M: measured time
  int threads = 1;
  specdec::WeightFormat weights = specdec::WeightFormat::fp32;  ///< of the timed model
  std::string batch;         ///< --batch B[,B...]: batched decoding, plain and speculative
  RoundRule rounds{3, 1.0};  ///< of the timed model's plain and speculative passes
  DeviceArgs device;         ///< --device cuda|emulated: --timed-model runs on the device
};

/// --threads, checked the same way wherever it is: the forward's pool holds at most
/// ThreadPool::max_threads threads, and corpus's workers are held to the same.
CLI::Option* add_threads_option(CLI::App& cmd, int& threads, const std::string& description) {
  return cmd.add_option("--threads", threads, description)
      ->transform(whole_number_in(1, specdec::llama::ThreadPool::max_threads));
}

/// --weights fp32|bf16: how the model's matrices are stored (models/host_kernels.hpp).
CLI::Option* add_weights_option(CLI::App& cmd, specdec::WeightFormat& weights, const std::string& whose) {
  return cmd
      .add_option_function<std::string>(
          "--weights",
          [&weights](const std::string& v) {
            weights = specdec::weight_format_named(v);
          },
          "Matrices of " + whose + ": fp32 (as in the checkpoint, default) or bf16 (rounded to bfloat16, multiplied "
          "with Intel AMX; the KV cache and attention too where heads hold 16 or a multiple of 32 values)")
      ->transform(one_of({"fp32", "bf16"}));
}

/// What an output option names: a file, or a directory of files.
enum class Output { file, directory };

/// An option naming an output (--json, --plot, --out): where it cannot be written (a missing
/// directory, no permission) it is refused as the command line is parsed, before any work, in one
/// sentence that names it.
CLI::Option* add_output_option(CLI::App& cmd, const std::string& name, std::string& path, const std::string& description,
                               Output kind = Output::file) {
  return cmd.add_option(name, path, description)
      ->check(CLI::Validator(
          [name, kind](std::string& text) {
            if (kind == Output::file) specdec::tools::check_output_file<input_error>(text, name);
            else specdec::tools::check_output_directory<input_error>(text, name);
            return std::string();
          },
          kind == Output::file ? "FILE" : "DIR"));
}

/// --json: the results as JSON.
void add_json_option(CLI::App& cmd, std::string& path) {
  add_output_option(cmd, "--json", path, "Write the results as JSON to this file");
}

/// --plot: each subcommand draws its own picture, `what`.
void add_plot_option(CLI::App& cmd, std::string& path, const std::string& what) {
  add_output_option(cmd, "--plot", path, "Draw " + what + " as SVG in this file");
}

/// What --plot draws in `replay` and `model`.
constexpr const char* histogram_plot = "the accepted-length histogram (with --batch: throughput against B)";

/// Accepts a --batch list (parse_batch_sizes).
CLI::Validator batch_sizes() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_batch_sizes(text);
        } catch (const input_error& e) {
          return e.what();
        }
        return {};
      },
      "B[,B...]");
}

/// `--budget N` (a fixed budget) or `--budget auto` (the decoder sizes each step from a cost
/// model, DecoderOptions::cost) and `--budget-cap N` (auto's most nodes per step).
void add_budget_options(CLI::App& cmd, BudgetArgs& b) {
  b.budget_option = cmd.add_option_function<std::string>(
         "--budget",
         [&b](const std::string& text) {
           b.automatic = text == "auto";
           if (!b.automatic) b.budget = std::stoi(text);
         },
         "auto (the default where a cost model is at hand: `model`, --timed-model, --cost): each step's size "
         "maximises expected tokens per second under the cost model (--cost, or a calibration of the model at "
         "start-up); N: at most N draft nodes per target call, after merging (without a cost model the default is 64)")
      ->transform(CLI::Validator(
          [](std::string& text) -> std::string {
            if (specdec::tools::same_name(specdec::tools::trimmed(text), "auto")) {
              text = "auto";
              return {};
            }
            const std::optional<long long> value = specdec::tools::whole_number(text);
            if (!value || *value < 0 || *value > INT_MAX) return "expected a whole number >= 0 or auto, got '" + text + "'";
            text = std::to_string(*value);
            return {};
          },
          "INT>=0|auto"));
  b.cap_option = cmd.add_option("--budget-cap", b.cap, "--budget auto: most draft nodes per step (default 64, or "
                                                      "the cost table's largest tree - 1 when smaller)")
                     ->transform(whole_number_at_least(0));
}

/// rest's options; with `features`, also those of the feature drafters (dresd, eagle: `model` only).
void add_resource_options(CLI::App& cmd, DrafterResources& a, bool features) {
  cmd.add_option("--datastore", a.datastore, "Token datastore of the drafter rest (specdec-datastore build)");
  cmd.add_option("--rest-occurrences", a.rest.max_occurrences,
                 "Occurrences rest reads at most per step (default 5000, REST's)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--draft-model", a.draft_model, "llama2.c checkpoint of the drafters staged and draft_model, with the "
                                                 "target's vocabulary (default: the stories260K draft, " +
                                                     a.draft_model.string() + ")");
  cmd.add_option("--staged-depth", a.staged.depth, "Draft-model tokens below the root (staged, draft_model; default 8)")
      ->transform(whole_number_at_least(0));
  cmd.add_option("--staged-top-k", a.staged.top_k, "Children per draft-model node (default 3)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--staged-budget", a.staged.budget, "Draft-model tree nodes at most (default 48)")
      ->transform(whole_number_at_least(0));
  cmd.add_option("--staged-inner-budget", a.staged.inner_budget,
                 "Nodes the second stage drafts per draft-model forward (default 16)")
      ->transform(whole_number_at_least(0));
  cmd.add_option("--ngram", a.ngram, "Katz trigram model of the drafter ngram and of staged's second stage "
                                     "(specdec-ngram build)");
  cmd.add_option("--ngram-budget", a.ngram_options.budget, "Nodes an n-gram draft has at most (default 16)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--ngram-depth", a.ngram_options.depth, "Deepest n-gram draft node (default 5)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--ngram-top-k", a.ngram_options.top_k, "Children per n-gram draft node (default 3)")
      ->transform(whole_number_at_least(1));
  if (!features) return;
  cmd.add_option("--dense-datastore", a.dense_datastore,
                 "Dense datastore of the drafter dresd (specdec-dense-datastore build)");
  cmd.add_option("--dresd-neighbours", a.dresd.neighbours, "Neighbours dresd retrieves per step (default 32)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--dresd-drafts", a.dresd.drafts, "Drafts dresd keeps (default 3)")->transform(whole_number_at_least(1));
  cmd.add_option("--dresd-depth", a.dresd.depth, "Tokens per dresd draft (default 20)")
      ->transform(whole_number_at_least(1));
  specdec::tools::add_dense_search_options(cmd, a.dresd_search, "--dresd-search", "dresd-");
  cmd.add_option("--eagle-head", a.eagle_head,
                 "EAGLE head file of the drafter eagle (default: the stories260K head, " + a.eagle_head.string() + ")");
}

/// The environment is input too: a SPECDEC_HOST_ISA that names no kernel path, or one this CPU
/// lacks, is the user's to fix (exit 2), not an internal error.
void check_host_isa() {
  try {
    specdec::llama::default_host_isa();
  } catch (const specdec::error& e) {
    throw input_error(e.what());
  }
}

/// --data-dir, where every subcommand finds its default files.
void add_data_dir_option(CLI::App& cmd, std::string& dir) {
  cmd.add_option("--data-dir", dir, "Data directory (default: $SPECDEC_DATA, else " SPECDEC_DEFAULT_DATA_DIR ")");
}

void add_data_options(CLI::App& cmd, DataArgs& a) {
  add_data_dir_option(cmd, a.data_dir);
  cmd.add_option("--questions", a.questions, "Questions jsonl (default: DATA/specbench/question.jsonl)");
  cmd.add_option("--answers", a.answers, "Recorded answers jsonl (default: DATA/specbench/vicuna-7b-v1.3-greedy.jsonl)");
  cmd.add_option("--tokenizer", a.tokenizer, "SentencePiece model (default: DATA/tokenizers/llama2.model)");
  cmd.add_option("--template", a.template_name, "Built-in chat template (default: vicuna)");
  cmd.add_option("--template-file", a.template_file, "Chat template file (see docs/specbench.md; not with --template)");
  cmd.add_option("--category", a.categories, "Replay only this category (repeatable, or comma-separated)");
  cmd.add_option("--max-turns", a.max_turns, "Replay at most this many turns, in file order")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--parity", a.parity, "Replay only the questions with odd or even ids")
      ->transform(one_of({"odd", "even"}));
  add_resource_options(cmd, a.drafters, false);
  add_budget_options(cmd, a.budget);
  add_json_option(cmd, a.json);
  cmd.add_option("--turns", a.sample, "Replay a fixed subsample of this many turns, spread evenly over the corpus "
                                      "(after the other filters)")
      ->transform(whole_number_at_least(1));
  cmd.add_flag("--warm-history", a.warm_history,
               "With --turns: decode the turns left out too, before the sampled turns that follow them, neither "
               "timed nor counted, so that drafters learning across turns (tree_history) hold the whole corpus");
  cmd.add_option("--cost", a.cost, "Cost table (specbench calibrate): also model tokens/s and the speedup over plain "
                                   "decoding");
}

fs::path data_path(const DataArgs& a, const std::string& given, const char* relative) {
  return given.empty() ? data_root(a.data_dir) / relative : fs::path(given);
}

/// Loads and tokenises the data once.
Corpus load_corpus(const DataArgs& a) {
  const ChatTemplate chat = a.template_file.empty() ? ChatTemplate::builtin(a.template_name)
                                                    : ChatTemplate::load(a.template_file);
  const auto questions = load_questions(data_path(a, a.questions, "specbench/question.jsonl"));
  const auto answers = load_answers(data_path(a, a.answers, "specbench/vicuna-7b-v1.3-greedy.jsonl"));
  const Tokenizer tokenizer(data_path(a, a.tokenizer, "tokenizers/llama2.model"));
  Corpus corpus = build_corpus(questions, answers, tokenizer, chat, {a.categories, a.max_turns, a.parity});
  sample_turns(corpus, a.sample, a.warm_history);
  return corpus;
}

/// Prints how well the answers' token counts match the counts recorded with them (stderr), once
/// the input has been checked (an input error stays one line).
void report_token_counts(const Corpus& corpus) {
  if (const TokenCountCheck check = check_token_counts(corpus); check.turns > 0) {
    std::cerr << fmt::format(
        "specbench: tokenised answer + EOS vs the token count recorded with it: {} of {} turns equal, {} "
        "within ±2 tokens (largest difference {})\n",
        check.exact, check.turns, check.within_2, check.max_difference);
  }
}

/// Refuses, before any work, the input files given (path, option) that are not readable regular
/// files: those read only after the corpus or the prompts are loaded.
void check_inputs(std::initializer_list<std::pair<const std::string&, const char*>> inputs) {
  for (const auto& [path, option] : inputs)
    if (!path.empty()) specdec::tools::check_input_file<input_error>(path, option);
}

void check_drafter_inputs(const DrafterResources& r) {
  check_inputs({{r.datastore.string(), "--datastore"},
                {r.ngram.string(), "--ngram"},
                {r.dense_datastore.string(), "--dense-datastore"}});
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out.flush()) throw input_error("cannot write " + path);
}

void run_list() {
  std::string drafters;
  for (const auto& d : drafter_names()) drafters += (drafters.empty() ? "" : ", ") + d;
  std::cout << "drafters: " << drafters << "\n"
            << "combinations (--drafter NAME[,NAME...], names in any order):\n";
  for (const auto& c : combinations()) std::cout << "  " << c.name() << "\n";
  std::cout << "tasks of `specbench model` (--task NAME):\n";
  for (const Task& t : builtin_tasks())
    std::cout << "  " << t.name << ": " << t.description << " (" << t.prompts.size() << " prompts)\n";
}

/// The options of `model`.
struct ModelArgs {
  std::string data_dir;
  std::string model;
  std::string tokenizer;
  std::vector<std::string> tasks;
  std::vector<std::string> prompt_files;
  std::vector<std::string> drafters;
  std::string verifier = "exact";
  double temperature = 1.0;
  double top_p = 1.0;
  double delta = 0.1;
  int top_k = 0;
  std::uint64_t seed = 0;
  BudgetArgs budget;
  std::string cost;  ///< --cost TABLE: the automatic budget's cost model
  int threads = 1;
  specdec::WeightFormat weights = specdec::WeightFormat::fp32;
  int max_new_tokens = 256;
  int max_prompts = 0;
  int show = 0;
  DrafterResources resources = default_resources();
  std::string json;
  std::string plot;
  std::string batch;  ///< --batch B[,B...]: batched decoding, plain and speculative
  RoundRule rounds{3, 1.0};  ///< of the plain and speculative passes
  DeviceArgs device;  ///< --device cuda|emulated: DeviceLlamaTarget
};

/// `--min-rounds N` and `--min-seconds S`: how long plain and speculative passes alternate.
void add_round_options(CLI::App& cmd, RoundRule& r) {
  cmd.add_option("--min-rounds", r.min_rounds, "Plain and speculative passes alternate in rounds: at least this many "
                                               "(default 3)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--min-seconds", r.min_seconds, "... and until each arm has run this many seconds in all (default 1)")
      ->transform(number_in(0, 1e6));
}

/// The model file `model` decodes with (by default stories260K from the data directory).
fs::path model_path(const ModelArgs& a) {
  return a.model.empty() ? data_root(a.data_dir) / "models/stories260K.bin" : fs::path(a.model);
}

/// Loads the model and its tokenizer (by default stories260K and tok512 from the data directory).
std::shared_ptr<const specdec::Llama2cModel> load_model(const ModelArgs& a, std::optional<specdec::Llama2cTokenizer>& tokenizer) {
  const fs::path tokenizer_path = a.tokenizer.empty() ? data_root(a.data_dir) / "models/tok512.bin" : fs::path(a.tokenizer);
  try {
    auto model = std::make_shared<const specdec::Llama2cModel>(specdec::Llama2cModel::load(model_path(a), a.weights));
    tokenizer = specdec::Llama2cTokenizer::load(tokenizer_path, model->config().vocab_size);
    return model;
  } catch (const specdec::error& e) {
    throw input_error(e.what());
  }
}

/// Loads the model, its tokenizer and the tasks' prompts, and says on stderr how many prompts were
/// skipped or had their new tokens cut to the model's positions.
ModelBench load_model_bench(const ModelArgs& a, std::optional<specdec::Llama2cTokenizer>& tokenizer, int& clamped) {
  std::vector<Task> from_files;
  for (const std::string& file : a.prompt_files) from_files.push_back(load_task(file));
  std::vector<const Task*> tasks;
  if (!a.tasks.empty() || a.prompt_files.empty())
    tasks = find_tasks(a.tasks.empty() ? std::vector<std::string>{"all"} : a.tasks);
  for (const Task& t : from_files) tasks.push_back(&t);
  auto model = load_model(a, tokenizer);
  ModelBench bench = make_model_bench(std::move(model), *tokenizer, tasks, a.max_new_tokens, a.max_prompts, &clamped);
  if (bench.skipped > 0)
    std::cerr << fmt::format("specbench: skipped {} prompts longer than the model's {} positions\n", bench.skipped,
                             bench.model->config().seq_len);
  if (clamped > 0)
    std::cerr << fmt::format("specbench: --max-new-tokens {} cut to the model's positions for {} prompts\n",
                             a.max_new_tokens, clamped);
  return bench;
}

/// Writes what a --batch run measured: the table, --json, --plot. Returns the exit code.
int report_batch(const BatchReport& report, const std::string& json, const std::string& plot) {
  print_batch_report(std::cout, report);
  if (!json.empty()) write_file(json, to_json(report).dump(2) + "\n");
  if (!plot.empty()) write_file(plot, batch_svg(report));
  return report.lossless() ? 0 : 1;
}

/// The cost table of --cost (none when `file` is empty), checked against the budget: a step's tree
/// has budget + 1 nodes. With --budget auto and no --budget-cap, the cap is lowered to what the
/// table covers.
std::optional<CostTable> load_cost_table(const std::string& file, BudgetArgs& b) {
  if (file.empty()) return std::nullopt;
  CostTable table = CostTable::load(file);
  if (b.automatic && b.cap_option->count() == 0) b.cap = std::min(b.cap, table.max_nodes() - 1);
  if (b.most() >= table.max_nodes())
    throw input_error(fmt::format("{} {}: a step's tree may have {} nodes, but the cost table {} measured "
                                  "forwards of at most {}",
                                  b.automatic ? "--budget auto --budget-cap" : "--budget", b.most(), tree_nodes(b.most()),
                                  file, table.max_nodes()));
  return table;
}

/// "the cost table FILE (what its metadata says)", for the reports.
std::string cost_table_source(const std::string& file, const CostTable& table) {
  return "the cost table " + file + " (" + table.describe() + ")";
}

/// The cost table that sizes `--budget auto`, in every command alike: the table of --cost where
/// one was given, else what `calibrate(how)` measures of `model` ("the model", "the timed model")
/// at start-up; none where the budget is fixed. What it is goes to `source`, for the report.
std::optional<CostTable> automatic_budget_table(const BudgetArgs& budget, const std::string& cost_file,
                                                const std::optional<CostTable>& table, const std::string& model,
                                                const std::function<CostTable(std::string& how)>& calibrate,
                                                std::string& source) {
  if (!budget.automatic) return std::nullopt;
  if (table) {
    source = cost_table_source(cost_file, *table);
    return table;
  }
  std::string how;
  CostTable calibrated = calibrate(how);
  source = model + ", " + how;
  return calibrated;
}

/// The device's quick cost table of `model`: trees of 1, 2, 4, ... `largest` nodes, median of 2;
/// `how` says so.
CostTable quick_device_calibration(const DeviceRuns& runs, const DeviceModelChoice& model, int largest,
                                   std::string& how) {
  CalibrateOptions quick;
  quick.nodes = doubling_sizes(largest);
  quick.repetitions = 2;
  std::ostringstream log;  // the per-context progress is not shown: the report says what was done
  how = "calibrated on " + runs.require() + " at start-up (median of 2)";
  return runs.calibrate(model, quick, log);
}

/// `model --budget auto`'s table (automatic_budget_table): --cost, else a calibration at start-up
/// of the model with trees of up to `largest` nodes, on the device where `device` names the model
/// there, else on the host.
std::optional<CostTable> model_budget_table(const ModelArgs& a, const std::optional<CostTable>& table, int largest,
                                            const DeviceModelChoice* device, std::string& source) {
  return automatic_budget_table(a.budget, a.cost, table, "the model", [&](std::string& how) {
    if (!device) return quick_calibration(model_path(a), a.threads, a.weights, largest, how);
    return quick_device_calibration(device_runs(a.device), *device, largest, how);
  }, source);
}

int run_model_batch(const ModelArgs& a, const std::optional<CostTable>& table) {
  const Combination& combination = find_combination(a.drafters);
  // On a device: its runner and model, checked before the prompts load.
  const DeviceRuns* runs = a.device.on_device() ? &device_runs(a.device) : nullptr;
  const DeviceBatchRunner device_runner = runs ? runs->find_batch_combination(combination.drafters) : nullptr;
  std::optional<DeviceModelChoice> device_model;
  if (runs) {
    device_model = specbench::device_model(a.device, model_path(a).string(), "--model");
    runs->require();
  }
  int clamped = 0;
  std::optional<specdec::Llama2cTokenizer> tokenizer;
  const ModelBench bench = load_model_bench(a, tokenizer, clamped);
  BatchOptions options;
  options.sizes = parse_batch_sizes(a.batch);
  options.budget = a.budget.most();
  options.threads = a.threads;
  options.resources = a.resources;
  if (!runs) options.rounds = a.rounds;  // a device runs one round (model_rules)
  std::string auto_budget;
  const int largest = batch_calibration_size(options.sizes, a.budget.cap, bench.model->config().seq_len,
                                             runs ? runs->max_tree_nodes() : INT_MAX);
  if (auto t = model_budget_table(a, table, largest, device_model ? &*device_model : nullptr, auto_budget))
    options.cost = BatchCostModel{std::move(*t)};
  const specdec::LlamaConfig& c = bench.model->config();
  std::string source = fmt::format("model: dim {}, {} layers, {} heads, vocab {}, {} positions", c.dim, c.n_layers,
                                   c.n_heads, c.vocab_size, c.seq_len);
  if (runs) source += "; on " + runs->require();
  else source += fmt::format("; {} thread{}", a.threads, a.threads == 1 ? "" : "s");
  const std::string target = runs ? std::string(runs->batch_target()) +
                                        ": one forward per step for all requests, each request's cache its own slot"
                                  : std::string(model_batch_target_description);
  BatchReport report{runs ? device_runner(bench, options, *device_model) : combination.batch.model(bench, options),
                     "model", source, target, a.budget.most(), auto_budget, a.budget.fixed_by_default()};
  return report_batch(report, a.json, a.plot);
}

/// `--show N`: the first N prompts and what the speculative decode continued them with.
void show_outputs(int n, const ModelBench& bench, const ModelRun& run, const specdec::Llama2cTokenizer& tokenizer) {
  for (std::size_t p = 0; p < std::min<std::size_t>(static_cast<std::size_t>(n), bench.prompts.size()); ++p) {
    const std::vector<token_t>& prompt = bench.prompts[p].tokens;
    std::cout << "\n--- " << bench.prompts[p].task << " " << p + 1 << ":\n"
              << tokenizer.decode(std::span(prompt).subspan(1), prompt[0]) << "[...]"
              << tokenizer.decode(run.turns[p].output, prompt.back()) << "\n";
  }
}

/// `model --device D` (device.hpp): the checkpoint on DeviceLlamaTarget, one sequence; with the
/// exact verifier every prompt checked against plain greedy decoding on the same device target.
int run_model_on_device(const ModelArgs& a, ModelOptions options, const std::optional<CostTable>& table) {
  const DeviceRuns& runs = device_runs(a.device);
  const DeviceModelRunner runner = runs.find_combination(find_combination(a.drafters).drafters, options.verifier);
  const DeviceModelChoice choice = device_model(a.device, model_path(a).string(), "--model");
  runs.require();
  int clamped = 0;
  std::optional<specdec::Llama2cTokenizer> tokenizer;
  const ModelBench bench = load_model_bench(a, tokenizer, clamped);
  std::string auto_budget;
  if (auto t = model_budget_table(a, table, tree_nodes(a.budget.cap), &choice, auto_budget)) options.cost = std::move(*t);
  EnergyMeter meter = runs.energy_meter();
  const DeviceModelRun on = runner(bench, options, choice, meter);
  ModelReport report = summarise_model(bench, on.run, options);
  report.report.auto_budget = auto_budget;
  report.clamped = clamped;
  report.report.fixed_by_default = a.budget.fixed_by_default();
  report.model += "; on " + on.device + ": " + on.target;
  print_model_report(std::cout, report);
  show_outputs(a.show, bench, on.run, *tokenizer);
  const StepParts parts = step_parts(on.run);
  std::cout << step_parts_line(parts, runs.timer()) << "\n";
  std::cout << energy_line(meter.available(), meter.why(), on.speculative_energy, on.plain_energy) << "\n";
  if (!a.json.empty()) {
    nlohmann::ordered_json j = to_json(report);
    j["device"] = {{"name", on.device}, {"target", on.target}};
    j["step_parts"] = step_parts_json(parts);
    j["energy"] = energy_json(meter.available(), meter.why(), on.speculative_energy, on.plain_energy);
    write_file(a.json, j.dump(2) + "\n");
  }
  if (!a.plot.empty()) write_file(a.plot, histogram_svg(report.report));
  return report.greedy && report.equal_to_plain != report.prompts ? 1 : 0;
}

int run_model(ModelArgs& a) {
  check_drafter_inputs(a.resources);
  const std::optional<CostTable> table = load_cost_table(a.cost, a.budget);
  if (!a.batch.empty()) return run_model_batch(a, table);
  const Combination& combination = find_combination(a.drafters);
  ModelOptions options;
  options.budget = a.budget.most();
  options.threads = a.threads;
  options.resources = a.resources;
  options.seed = a.seed;
  options.rounds = a.rounds;
  options.sampling.temperature = static_cast<float>(a.temperature);
  options.sampling.top_p = static_cast<float>(a.top_p);
  options.conditional.delta = static_cast<float>(a.delta);
  options.conditional.top_k = a.top_k;
  if (a.verifier == "exact") options.verifier = VerifierKind::exact;
  else if (a.verifier == "rejection") options.verifier = VerifierKind::rejection;
  else options.verifier = VerifierKind::conditional;
  if (a.device.on_device()) return run_model_on_device(a, std::move(options), table);
  int clamped = 0;
  std::optional<specdec::Llama2cTokenizer> tokenizer;
  const ModelBench bench = load_model_bench(a, tokenizer, clamped);
  std::string auto_budget;
  if (auto t = model_budget_table(a, table, tree_nodes(a.budget.cap), nullptr, auto_budget)) options.cost = std::move(*t);
  const ModelRun run = combination.model[static_cast<std::size_t>(options.verifier)](bench, options);
  ModelReport report = summarise_model(bench, run, options);
  report.report.auto_budget = auto_budget;
  report.report.fixed_by_default = a.budget.fixed_by_default();
  report.clamped = clamped;
  print_model_report(std::cout, report);
  show_outputs(a.show, bench, run, *tokenizer);
  if (!a.json.empty()) write_file(a.json, to_json(report).dump(2) + "\n");
  if (!a.plot.empty()) write_file(a.plot, histogram_svg(report.report));
  return report.greedy && report.equal_to_plain != report.prompts ? 1 : 0;
}

void add_model_options(CLI::App& cmd, ModelArgs& a) {
  add_data_dir_option(cmd, a.data_dir);
  cmd.add_option("--model", a.model, "llama2.c checkpoint (default: DATA/models/stories260K.bin)");
  cmd.add_option("--tokenizer", a.tokenizer, "llama2.c tokenizer.bin (default: DATA/models/tok512.bin)");
  cmd.add_option("--task", a.tasks, "Task(s) to decode: stories, retell or all (default all; repeatable, or "
                                    "comma-separated)");
  cmd.add_option("--prompts", a.prompt_files, "A task of your own: a text file, one prompt per line (\\n for a "
                                              "line break); the task is named after the file (repeatable)");
  cmd.add_option("--drafter", a.drafters, "Drafter name(s); all of them combine into one decoder (repeatable)")
      ->required();
  add_budget_options(cmd, a.budget);
  add_round_options(cmd, a.rounds);
  cmd.add_option("--cost", a.cost, "--budget auto: the cost table (specbench calibrate) of the decoder's cost model "
                                   "(default: a quick calibration of the model at start-up)");
  add_weights_option(cmd, a.weights, "the model, plain and speculative alike");
  add_threads_option(cmd, a.threads, "Threads of the target's forward, plain and speculative alike (default 1)");
  cmd.add_option("--max-new-tokens", a.max_new_tokens,
                 "New tokens per prompt at most, cut to the model's positions (default 256)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--max-prompts", a.max_prompts, "Decode at most this many prompts of each task")
      ->transform(whole_number_at_least(1));
  add_resource_options(cmd, a.resources, true);
  cmd.add_option("--show", a.show, "Print the first N prompts and their continuations")->transform(whole_number_at_least(1));
  add_json_option(cmd, a.json);
  add_plot_option(cmd, a.plot, histogram_plot);
  cmd.add_option("--batch", a.batch, "Decode the prompts B at a time, plainly and speculatively, for each B of the list "
                                     "(e.g. 1,2,4,8; at most " + std::to_string(max_batch_size) + "; exact verifier; "
                                     "not with --show)")
      ->check(batch_sizes());
}

/// The options of `corpus`.
struct CorpusArgs {
  std::string data_dir;
  std::string model;
  std::string tokenizer;
  StoryCorpusOptions options;
  std::string out;
  double temperature = 1.0;
};

int run_corpus(CorpusArgs& a) {
  ModelArgs paths;
  paths.data_dir = a.data_dir;
  paths.model = a.model;
  paths.tokenizer = a.tokenizer;
  std::optional<specdec::Llama2cTokenizer> tokenizer;
  const auto model = load_model(paths, tokenizer);
  a.options.out = a.out;
  a.options.temperature = static_cast<float>(a.temperature);
  const StoryCorpusSummary s = generate_story_corpus(model, *tokenizer, a.options, &std::cerr);
  std::cout << fmt::format("specbench corpus: {} stories ({} greedy), {} tokens in {:.1f} s ({:.0f} tokens/s) -> {}\n",
                           s.stories, s.greedy_stories, s.tokens, s.seconds, static_cast<double>(s.tokens) / s.seconds,
                           a.out);
  return 0;
}

void add_corpus_options(CLI::App& cmd, CorpusArgs& a) {
  add_data_dir_option(cmd, a.data_dir);
  cmd.add_option("--model", a.model, "llama2.c checkpoint (default: DATA/models/stories260K.bin)");
  cmd.add_option("--tokenizer", a.tokenizer, "llama2.c tokenizer.bin (default: DATA/models/tok512.bin)");
  add_output_option(cmd, "--out", a.out, "Output directory (tokens.bin, features.f32, corpus.json)", Output::directory)
      ->required();
  cmd.add_option("--tokens", a.options.tokens, "Stop after the story that reaches this many tokens (default 10000000)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--stories", a.options.stories, "Generate exactly this many stories instead")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--temperature", a.temperature, "Temperature of the sampled stories (default 1)")->transform(number_in(0, 1e6));
  cmd.add_option("--greedy-share", a.options.greedy_share, "Share of stories decoded greedily (default 0.1)")
      ->transform(number_in(0, 1));
  cmd.add_option("--seed", a.options.seed, "Random seed (default 0)")->transform(whole_number_at_least(0, LLONG_MAX));
  add_threads_option(cmd, a.options.threads, "Decoding threads (default: one per core)");
  cmd.add_flag("--features", a.options.features, "Also write the model's feature row of every token (features.f32)");
}

void add_verifier_options(CLI::App& cmd, ModelArgs& a) {
  cmd.add_option("--verifier", a.verifier, "exact (default), rejection (lossless sampling) or conditional (lossy)")
      ->transform(one_of({"exact", "rejection", "conditional"}));
  cmd.add_option("--temperature", a.temperature, "Sampling temperature of rejection sampling (default 1), or of the "
                                                "token after a conditional verifier's accepted path (default 0: greedy)")
      ->transform(number_in(0, 1e6));
  cmd.add_option("--top-p", a.top_p, "Rejection sampling's top-p (default 1: off)")->transform(number_in(0, 1, true));
  cmd.add_option("--seed", a.seed, "Random seed of the sampling verifiers (default 0)")
      ->transform(whole_number_at_least(0, LLONG_MAX));
  cmd.add_option("--delta", a.delta, "Conditional verification's threshold (default 0.1)")->transform(number_in(0, 1));
  cmd.add_option("--top-k", a.top_k, "Conditional verification's top-k (default 0: off)")->transform(whole_number_at_least(0));
}

/// The combination's replay runner; input_error when a drafter reads the target's features.
auto replay_of(const Combination& c) {
  if (!c.replay)
    throw input_error("the combination " + c.name() + " reads the target's features, which a replay has not: run it "
                      "with `specbench model`");
  return c.replay;
}

/// What times a replay with --cost: "modelled from the cost table ...".
std::string table_source(const DataArgs& a, const CostTable& table) {
  return "modelled from " + cost_table_source(a.cost, table);
}

/// `--timed-model M`: the model, checked against the replay. Drops (and says so) the turns M's
/// positions cannot hold; what M is goes to `source`.
std::shared_ptr<const specdec::Llama2cModel> load_timed_model(const ReplayArgs& r, const DataArgs& a, Corpus& corpus,
                                                              std::string& source) {
  std::shared_ptr<const specdec::Llama2cModel> model;
  try {
    model = std::make_shared<const specdec::Llama2cModel>(specdec::Llama2cModel::load(r.timed_model, r.weights));
  } catch (const specdec::error& e) {
    throw input_error(e.what());
  }
  const specdec::LlamaConfig& c = model->config();
  fit_to_timed_model(corpus, r.timed_model, c.vocab_size, c.seq_len, a.budget.most());
  const auto note = synthetic_model_note(r.timed_model);
  source = fmt::format("measured: every step also run through {} ({}{}), {} weights, {} thread(s)", r.timed_model,
                       specdec::Llama2cModel::describe(c), note ? "; SYNTHETIC weights, timing only" : "",
                       specdec::weight_format_name(r.weights), r.threads);
  return model;
}

/// `replay --budget auto`'s table (automatic_budget_table): --cost, else a calibration at
/// start-up of the timed model with trees of up to `largest` nodes, on the device where `device`
/// is its coster, else on the host.
std::optional<CostTable> replay_budget_table(const DataArgs& a, const std::optional<CostTable>& table,
                                             const ReplayArgs& r, int largest, DeviceStepCoster* device,
                                             std::string& source) {
  return automatic_budget_table(a.budget, a.cost, table, "the timed model", [&](std::string& how) {
    return device ? device->quick_calibration(largest, how)
                  : quick_calibration(r.timed_model, r.threads, r.weights, largest, how);
  }, source);
}

/// The timed model on the device `--device` names (nullopt on the host, its file checked), once
/// the device is known to be usable.
std::optional<DeviceModelChoice> timed_device_model(const ReplayArgs& r) {
  if (!r.device.on_device()) {
    check_inputs({{r.timed_model, "--timed-model"}});
    return std::nullopt;
  }
  device_runs(r.device).require();
  return device_model(r.device, r.timed_model, "--timed-model");
}

int run_replay_batch(DataArgs& a, const ReplayArgs& r) {
  const Combination& combination = find_combination(r.drafters);
  replay_of(combination);  // a feature drafter has no replay
  const BatchRunners& runners = combination.batch;
  const std::optional<DeviceModelChoice> device_model = timed_device_model(r);
  Corpus corpus = load_corpus(a);
  BatchOptions options;
  options.sizes = parse_batch_sizes(r.batch);
  options.budget = a.budget.most();
  std::string timed_source, timed_target;
  std::optional<specdec::LlamaConfig> timed;  // the timed model's shape
  if (device_model) {
    const DeviceRuns& runs = device_runs(r.device);
    timed.emplace();
    options.timed = runs.timed_batch(*device_model, corpus, options.budget, timed_source, *timed);
    timed_target = runs.batch_target();
  } else if (!r.timed_model.empty()) {
    auto model = load_timed_model(r, a, corpus, timed_source);
    timed = model->config();
    options.timed = host_timed_batch(std::move(model), r.threads);
    timed_target = "Llama2cBatchTarget";
  }
  report_token_counts(corpus);
  std::string auto_budget;
  if (a.budget.automatic) {  // with a timed model and without --cost (replay_rules)
    const int largest = batch_calibration_size(options.sizes, a.budget.cap, timed->seq_len,
                                               device_model ? device_runs(r.device).max_tree_nodes() : INT_MAX);
    if (device_model) {  // a calibration of the same model on the device
      std::string how;
      options.cost = BatchCostModel{quick_device_calibration(device_runs(r.device), *device_model, largest, how)};
      auto_budget = "the timed model, " + how;
    } else {
      options.cost = BatchCostModel{*replay_budget_table(a, std::nullopt, r, largest, nullptr, auto_budget)};
    }
  }
  options.threads = r.threads;
  options.resources = a.drafters;
  // Without a timed model the passes time drafting and bookkeeping only: one round says all.
  if (timed) options.rounds = r.rounds;
  BatchReport report{runners.replay(corpus, options), "replay",
                     timed ? "Spec-Bench replay: acceptance from the recorded answers; " + timed_source
                           : std::string("Spec-Bench replay: acceptance from the recorded answers, no model runs "
                                         "(seconds are drafting and bookkeeping only; fwd is what a model would run)"),
                     timed ? "ReplayBatchTarget (one ReplayTarget per request) + " + timed_target + " of the timed model"
                           : "ReplayBatchTarget: one ReplayTarget per request (PerSlotTarget<ReplayTarget>)",
                     a.budget.most(), auto_budget, a.budget.fixed_by_default()};
  return report_batch(report, a.json, a.plot);
}

int run_replay(DataArgs& a, const ReplayArgs& r) {
  check_drafter_inputs(a.drafters);
  if (!r.batch.empty()) return run_replay_batch(a, r);
  const Combination& combination = find_combination(r.drafters);
  const auto runner = replay_of(combination);
  const std::optional<CostTable> table = load_cost_table(a.cost, a.budget);
  const std::optional<DeviceModelChoice> device_model = timed_device_model(r);
  Corpus corpus = load_corpus(a);
  std::unique_ptr<StepCoster> coster;
  DeviceStepCoster* device = nullptr;  // the device's coster, when it is the one
  std::string source;
  if (device_model) {
    auto made = device_runs(r.device).make_coster(*device_model, corpus, a.budget.most(), source);
    device = made.get();
    coster = std::move(made);
  } else if (!r.timed_model.empty()) {
    coster = std::make_unique<ModelCoster>(make_llama_target(load_timed_model(r, a, corpus, source), r.threads));
  } else if (table) {
    coster = std::make_unique<TableCoster>(*table);
    source = table_source(a, *table);
  }
  report_token_counts(corpus);
  std::string auto_source;
  const auto budget_table = replay_budget_table(a, table, r, tree_nodes(a.budget.cap), device, auto_source);
  // A measured run whose budget a cost table sizes: the table also predicts the same steps.
  std::optional<PredictingCoster> predicting;
  if (!r.timed_model.empty() && budget_table) predicting.emplace(*coster, *budget_table);
  const ReplayOptions options{.budget = a.budget.most(),
                              .resources = a.drafters,
                              .coster = predicting ? &*predicting : coster.get(),
                              .timed = !r.timed_model.empty(),
                              .cost = budget_table ? specdec::AnyCostModel(*budget_table) : specdec::AnyCostModel()};
  Rounds rounds;
  const ReplayRun run = r.timed_model.empty() ? runner(corpus, options)
                                              : replay_in_rounds(runner, corpus, options, r.rounds, rounds);
  Report report = summarise(corpus, run, options);
  report.cost_source = source;
  report.auto_budget = auto_source;
  report.fixed_by_default = a.budget.fixed_by_default();
  report.rounds = rounds;
  print_report(std::cout, report);
  std::optional<Prediction> prediction;
  if (predicting) {
    prediction = Prediction{auto_source, summarise(corpus, predicting->predicted(run), options).overall.speedup(),
                            report.overall.speedup()};
    std::cout << prediction_line(*prediction) << "\n";
  }
  if (device)
    std::cout << energy_line(device->energy_meter().available(), device->energy_meter().why(),
                             device->speculative_energy(), device->plain_energy())
              << "\n";
  if (!a.json.empty()) {
    nlohmann::ordered_json j = to_json(report);
    if (prediction) j["prediction"] = to_json(*prediction);
    if (device)
      j["energy"] = energy_json(device->energy_meter().available(), device->energy_meter().why(),
                                device->speculative_energy(), device->plain_energy());
    write_file(a.json, j.dump(2) + "\n");
  }
  if (!a.plot.empty()) write_file(a.plot, histogram_svg(report));
  return 0;
}

/// `--modelled FILE`'s table, checked like --cost's against the budget (a step's tree has budget + 1
/// nodes; the table must have measured trees that large).
CostTable load_modelled_table(const std::string& file, int budget) {
  specdec::tools::check_input_file<input_error>(file, "--modelled");
  CostTable table = CostTable::load(file);
  if (budget >= table.max_nodes())
    throw input_error(fmt::format("--modelled {}: a step's tree may have {} nodes, but the table measured forwards of "
                                  "at most {}",
                                  file, tree_nodes(budget), table.max_nodes()));
  return table;
}

void run_compare(DataArgs& a, const std::vector<std::string>& names, const std::vector<std::string>& modelled_files) {
  check_drafter_inputs(a.drafters);
  std::vector<const Combination*> chosen;
  for (const auto& name : names) {
    chosen.push_back(&find_combination(std::span(&name, 1)));
    replay_of(*chosen.back());
  }
  const std::optional<CostTable> table = load_cost_table(a.cost, a.budget);
  std::vector<CostTable> modelled_tables;
  for (const std::string& file : modelled_files) modelled_tables.push_back(load_modelled_table(file, a.budget.most()));
  const Corpus corpus = load_corpus(a);
  report_token_counts(corpus);
  std::optional<TableCoster> coster;
  if (table) coster.emplace(*table);
  // compare has no model to calibrate: its automatic budget is sized by the --cost table (compare_rules).
  std::string auto_source;
  if (a.budget.automatic) auto_source = cost_table_source(a.cost, *table);
  const ReplayOptions options{.budget = a.budget.most(),
                              .resources = a.drafters,
                              .coster = coster ? &*coster : nullptr,
                              .cost = a.budget.automatic ? specdec::AnyCostModel(*table) : specdec::AnyCostModel()};
  std::vector<Report> reports;
  for (const Combination* c : chosen) {
    reports.push_back(summarise(corpus, replay_of(*c)(corpus, options), options));
    if (table) reports.back().cost_source = table_source(a, *table);
    reports.back().auto_budget = auto_source;
    reports.back().fixed_by_default = a.budget.fixed_by_default();
  }
  print_comparison(std::cout, reports);
  // The same replays, their steps timed by each --modelled table (the budget stays the run's).
  std::vector<ModelledRun> modelled;
  for (std::size_t t = 0; t < modelled_tables.size(); ++t) {
    ModelledRun& run = modelled.emplace_back();
    run.source = cost_table_source(modelled_files[t], modelled_tables[t]);
    TableCoster timed(modelled_tables[t]);
    ReplayOptions costed = options;
    costed.coster = &timed;
    for (const Combination* c : chosen) run.reports.push_back(summarise(corpus, replay_of(*c)(corpus, costed), costed));
    print_modelled(std::cout, run);
  }
  if (!a.json.empty()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& r : reports) j[r.combination()] = to_json(r);
    if (!modelled.empty()) {
      j["modelled"] = nlohmann::ordered_json::array();
      for (const ModelledRun& run : modelled) j["modelled"].push_back(to_json(run));
    }
    write_file(a.json, j.dump(2) + "\n");
  }
  if (!a.plot.empty()) write_file(a.plot, comparison_svg(reports));
}

/// The options of `calibrate`.
struct CalibrateArgs {
  CalibrateOptions options;
  int max_nodes = 128;
  std::string out;
  std::string plot;
  DeviceArgs device;  ///< --device cuda|emulated: DeviceLlamaTarget, --model or --synthetic
};

int run_calibrate(CalibrateArgs& a) {
  const std::optional<DeviceModelChoice> device = calibrate_device_model(a.device, a.options);
  a.options.nodes = doubling_sizes(a.max_nodes);
  std::sort(a.options.contexts.begin(), a.options.contexts.end());
  a.options.contexts.erase(std::unique(a.options.contexts.begin(), a.options.contexts.end()), a.options.contexts.end());
  if (a.options.layers_of == 0)
    if (const auto note = synthetic_model_note(a.options.model); note && note->value("layers_of", 0) > note->value("layers", 0))
      a.options.layers_of = note->value("layers_of", 0);
  const fs::path scratch = a.out.empty() ? fs::temp_directory_path() / "specbench-calibrate" : fs::path(a.out);
  const CostTable table =
      device ? device_runs(a.device).calibrate(*device, a.options, std::cerr) : calibrate(a.options, scratch, std::cerr);
  print_cost_table(std::cout, table);
  if (!a.out.empty()) {
    write_file(a.out, table.to_json().dump(2) + "\n");
    std::cout << "wrote " << a.out << "\n";
  }
  if (!a.plot.empty()) write_file(a.plot, cost_svg(table));
  return 0;
}

void add_calibrate_options(CLI::App& cmd, CalibrateArgs& a) {
  cmd.add_option("--model", a.options.model, "llama2.c checkpoint to time (e.g. from specdec-synth-model)");
  add_device_option(cmd, a.device, true);
  add_threads_option(cmd, a.options.threads, "Threads of the forward (default 1)");
  add_weights_option(cmd, a.options.weights, "the model");
  add_output_option(cmd, "--out", a.out, "Write the cost table (JSON, docs/specbench.md) to this file");
  add_plot_option(cmd, a.plot, "c(n) / c(1) against n");
  cmd.add_option("--layers-of", a.options.layers_of,
                 "The checkpoint holds K of this many layers: scale to them (default: the layers_of of the "
                 "specdec-synth-model side-car FILE.json)")
      ->transform(whole_number_at_least(1));
  cmd.add_option_function<std::vector<std::string>>(
         "--contexts",
         [&a](const std::vector<std::string>& lists) {
           a.options.contexts.clear();
           for (const std::string& item : specdec::tools::list_items(lists))
             a.options.contexts.push_back(static_cast<int>(*specdec::tools::whole_number(item)));
         },
         "Context lengths to measure at (default 128,512,2048; repeatable, or comma-separated; those without room "
         "for the largest tree are left out)")
      ->transform(specdec::tools::whole_number_list(0, INT_MAX));
  cmd.add_option("--max-nodes", a.max_nodes, "Largest tree measured; n = 1, 2, 4, ... up to it (default 128)")
      ->transform(whole_number_at_least(1));
  cmd.add_option("--repetitions", a.options.repetitions, "Timed forwards per cell, after one warm-up (default 5)")
      ->transform(whole_number_at_least(1));
}

// ---- The rules between options ----------------------------------------------------------------
// One function per subcommand, run once the command line is parsed and before anything else: each
// refuses what does not go together (one sentence, exit 2) and settles the defaults that hang on
// other options. The run_* functions take the options as these leave them.

/// Refuses `option` given without `needed`.
void require(const CLI::App& cmd, const char* option, const char* needed) {
  if (cmd.count(option) > 0 && cmd.count(needed) == 0) throw input_error(std::string(option) + " requires " + needed);
}

/// --graphs and --tensor-cores are a device target's options.
void device_rules(const DeviceArgs& d) {
  if (d.graphs && !d.on_device()) throw input_error("--graphs: applies to --device cuda or emulated only");
  if (d.tensor_cores && !d.on_device()) throw input_error("--tensor-cores: applies to --device cuda or emulated only");
}

/// Refuses `option` given with `other`.
void exclude(const CLI::App& cmd, const char* option, const char* other) {
  if (cmd.count(option) > 0 && cmd.count(other) > 0) throw input_error(std::string(option) + " excludes " + other);
}

/// The rules of the data options, `replay`'s and `compare`'s alike.
void data_rules(const CLI::App& cmd) {
  exclude(cmd, "--template", "--template-file");
  require(cmd, "--warm-history", "--turns");
}

void replay_rules(const CLI::App& cmd, DataArgs& a, const ReplayArgs& r) {
  data_rules(cmd);
  device_rules(r.device);
  for (const char* of_the_timed_model : {"--threads", "--weights", "--min-rounds", "--min-seconds"})
    require(cmd, of_the_timed_model, "--timed-model");
  exclude(cmd, "--batch", "--cost");
  const bool timed = !r.timed_model.empty();
  if (r.device.on_device() && !timed)
    throw input_error("--device " + r.device.device + ": `replay` runs the device with --timed-model synthetic:SHAPE "
                      "or a checkpoint");
  if (!r.batch.empty()) {
    if (a.warm_history)
      throw input_error("--warm-history does not combine with --batch (the batched replay decodes the sampled turns "
                        "only)");
    a.budget.settle(timed);
    if (a.budget.automatic && !timed)
      throw input_error("--batch --budget auto needs a model to time: --timed-model M (calibrated at start-up)");
    return;
  }
  a.budget.settle(!a.cost.empty() || timed);
  if (a.budget.automatic && a.cost.empty() && !timed)
    throw input_error("--budget auto needs a cost model: --cost TABLE, or --timed-model M (calibrated at start-up)");
  if (!a.cost.empty() && timed && !a.budget.automatic)
    throw input_error("--cost and --timed-model: the time is measured; a cost table only sizes --budget auto");
}

void compare_rules(const CLI::App& cmd, DataArgs& a) {
  data_rules(cmd);
  a.budget.settle(!a.cost.empty());
  if (a.budget.automatic && a.cost.empty()) throw input_error("--budget auto needs a cost model: --cost TABLE");
}

void model_rules(const CLI::App& cmd, ModelArgs& a) {
  device_rules(a.device);
  // Each verifier's options apply to it only; a conditional verifier's bonus token is greedy by default.
  const auto only_with = [&](const char* option, const char* verifiers) {
    if (cmd.count(option) > 0)
      throw input_error(std::string(option) + ": applies to --verifier " + verifiers + " only");
  };
  if (a.verifier == "exact") {
    for (const char* option : {"--temperature", "--top-p", "--seed", "--delta", "--top-k"})
      only_with(option, "rejection or conditional");
  } else if (a.verifier == "rejection") {
    only_with("--delta", "conditional");
    only_with("--top-k", "conditional");
  } else {
    only_with("--top-p", "rejection");
    if (cmd.count("--temperature") == 0) a.temperature = 0.0;
  }
  exclude(cmd, "--batch", "--show");
  a.budget.settle(true);  // the model itself is at hand to calibrate
  if (!a.cost.empty() && !a.budget.automatic)
    throw input_error("--cost: `specbench model` times its own decoding; a cost table only sizes --budget auto");
  if (a.device.on_device()) {
    const std::string device = "--device " + a.device.device;
    if (cmd.count("--min-rounds") > 0 || cmd.count("--min-seconds") > 0)
      throw input_error(device + ": `model` runs one round of each pass (a GPU check's time is short); --min-rounds "
                        "and --min-seconds are the host's");
    if (a.threads != 1 || a.weights != specdec::WeightFormat::fp32)
      throw input_error(device + ": --threads and --weights are the host's options (a checkpoint runs in fp32 on "
                        "the device)");
  }
  if (!a.batch.empty() && a.verifier != "exact") throw input_error("--batch: runs with --verifier exact only");
}

/// --device cuda takes --model FILE or --synthetic SHAPE, and none of the host's --threads,
/// --weights, --layers-of; the host takes --model.
void calibrate_rules(const CalibrateArgs& a) {
  device_rules(a.device);
  const CalibrateOptions& o = a.options;
  if (!a.device.on_device()) {
    if (!a.device.synthetic.empty())
      throw input_error("--synthetic SHAPE runs on a device: add --device cuda (or emulated)");
    if (o.model.empty()) throw input_error("calibrate needs --model FILE (or --device cuda --synthetic SHAPE)");
    return;
  }
  const std::string device = "--device " + a.device.device;
  if (o.model.empty() == a.device.synthetic.empty())
    throw input_error(device + ": calibrate takes either --model FILE or --synthetic SHAPE (one of the two)");
  if (o.threads != 1 || o.weights != specdec::WeightFormat::fp32 || o.layers_of != 0)
    throw input_error(device + ": --threads, --weights and --layers-of are the host's options (a checkpoint "
                      "runs in fp32 on the device, a synthetic shape in bf16)");
}

void corpus_rules(const CLI::App& cmd, CorpusArgs& a) {
  exclude(cmd, "--tokens", "--stories");
  if (cmd.count("--stories") > 0) a.options.tokens = 0;  // a number of stories, not of tokens
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specbench: replays recorded greedy LLM answers with drafter combinations and reports tau "
               "(tokens per target call, bonus token included), drafting cost and accepted lengths"};
  app.require_subcommand(1);

  app.add_subcommand("list", "List the drafters and the compiled drafter combinations");

  DataArgs replay_args;
  ReplayArgs replay_only;
  auto* replay = app.add_subcommand("replay", "Replay every turn with one drafter combination");
  add_data_options(*replay, replay_args);
  replay->add_option("--drafter", replay_only.drafters, "Drafter name(s); all of them combine into one decoder "
                                                        "(repeatable)")
      ->required();
  add_plot_option(*replay, replay_args.plot, histogram_plot);
  replay->add_option("--timed-model", replay_only.timed_model,
                     "llama2.c checkpoint (vocabulary >= the replay's) that also runs every step, timed, next to plain "
                     "decoding of the same tokens");
  add_threads_option(*replay, replay_only.threads, "Threads of the timed model's forward (default 1)");
  add_weights_option(*replay, replay_only.weights, "the timed model");
  add_round_options(*replay, replay_only.rounds);
  add_device_option(*replay, replay_only.device, false);
  replay->add_option("--batch", replay_only.batch, "Replay the turns B at a time, plainly and speculatively, for each "
                                                   "B of the list (e.g. 1,2,4,8; at most " +
                                                       std::to_string(max_batch_size) + "; not with --cost)")
      ->check(batch_sizes());

  DataArgs compare_args;
  std::vector<std::string> combos, modelled_tables;
  auto* compare = app.add_subcommand("compare", "Replay several combinations on the same data and compare them");
  add_data_options(*compare, compare_args);
  compare->add_option("combinations", combos, "Combinations such as pld or tree,casd")->required();
  add_plot_option(*compare, compare_args.plot, "tau (and with --cost the speedup) per combination and category");
  compare->add_option("--modelled", modelled_tables,
                      "A cost table measured elsewhere (e.g. by calibrate --device cuda): also print the tok/s and "
                      "speedup each combination's steps would reach there, at this run's budget (repeatable)");

  CalibrateArgs calibrate_args;
  auto* calibrate_cmd = app.add_subcommand("calibrate", "Time a llama2.c model's forward for trees of 1 to 128 nodes "
                                                        "at several context lengths: a cost table for --cost");
  add_calibrate_options(*calibrate_cmd, calibrate_args);

  ModelArgs model_args;
  auto* model = app.add_subcommand(
      "model", "Decode the tasks' prompts with a llama2.c model and one drafter combination; compare with plain decoding");
  add_model_options(*model, model_args);
  add_verifier_options(*model, model_args);
  add_device_option(*model, model_args.device, false);

  CorpusArgs corpus_args;
  auto* corpus = app.add_subcommand("corpus", "Generate a corpus of stories with a llama2.c model (tokens, optionally "
                                              "features) for datastores and draft-model training");
  add_corpus_options(*corpus, corpus_args);

  specdec::tools::keep_repeated_values(app);
  try {
    app.parse(argc, argv);  // an output that cannot be written is refused here (add_output_option)
    specdec::tools::check_option_values<CLI::ValidationError>(app);
    if (replay->parsed()) replay_rules(*replay, replay_args, replay_only);
    else if (compare->parsed()) compare_rules(*compare, compare_args);
    else if (model->parsed()) model_rules(*model, model_args);
    else if (corpus->parsed()) corpus_rules(*corpus, corpus_args);
    else if (calibrate_cmd->parsed()) calibrate_rules(calibrate_args);
    specdec::tools::check_stdout_open<input_error>();
    check_host_isa();
    int code = 0;
    if (replay->parsed()) code = run_replay(replay_args, replay_only);
    else if (compare->parsed()) run_compare(compare_args, combos, modelled_tables);
    else if (model->parsed()) code = run_model(model_args);
    else if (corpus->parsed()) code = run_corpus(corpus_args);
    else if (calibrate_cmd->parsed()) code = run_calibrate(calibrate_args);
    else run_list();
    specdec::tools::finish_stdout<input_error>();
    return code;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::cerr << "specbench: " << e.what() << " (see specbench --help)\n";
    return 2;
  } catch (const input_error& e) {
    std::cerr << "specbench: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "specbench: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
