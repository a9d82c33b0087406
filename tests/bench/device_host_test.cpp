// What is the same for every device of specbench's --device (bench/specbench/device_host.cpp): the
// model choice, the contexts a GPU table measures, the GPU table's metadata (and that it survives a round trip
// through the table's file), NVML's absence, and the joules per token.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "support/temp_dir.hpp"

#include "cost_table.hpp"
#include "device.hpp"
#include "input_error.hpp"

using namespace specbench;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("device_model_choice reads synthetic:SHAPE and checkpoint files, and names bad ones") {
  const DeviceModelChoice shape = device_model_choice("synthetic:Llama-2-7B", "--timed-model");
  CHECK(shape.shape == "Llama-2-7B");
  CHECK(shape.file.empty());
  CHECK(shape.name() == "synthetic:Llama-2-7B");
  CHECK_THROWS_WITH(device_model_choice("synthetic:Llama-9B", "--timed-model"),
                    StartsWith("--timed-model: unknown shape 'Llama-9B'; the shapes are: ") && Contains("Llama-3-8B"));
  CHECK_THROWS_AS(device_model_choice("/nonexistent/model.bin", "--model"), input_error);
  const specdec::testing::TempDir dir;
  const auto file = dir.write("m.bin", "x");
  const DeviceModelChoice checkpoint = device_model_choice(file.string(), "--model");
  CHECK(checkpoint.shape.empty());
  CHECK(checkpoint.name() == file.string());
}

TEST_CASE("a GPU cost table names its card, date and commit, and keeps them through its file") {
  const DeviceModelChoice shape = device_model_choice("synthetic:Llama-2-7B", "--synthetic");
  CostTable t;
  t.nodes = {1, 2};
  t.contexts = {{128, 7900, {7900, 8600}}};
  t.metadata = device_table_metadata(shape, "dim 4096, 32 layers", 13476000000ull, "bf16", "cuda", "NVIDIA H100 80GB HBM3",
                                     "CUDA events", 5);
  CHECK(t.metadata["device"] == "cuda");
  CHECK(t.metadata["machine"] == "NVIDIA H100 80GB HBM3");
  CHECK(t.metadata["repetitions"] == 5);
  CHECK(t.metadata["model"]["synthetic_weights"] == true);
  CHECK(t.metadata["model"]["shape"] == "Llama-2-7B");
  const std::string date = t.metadata["date"];
  CHECK(date.size() == 20);  // 2026-11-27T21:04:09Z
  CHECK(date.back() == 'Z');
  const std::string commit = t.metadata["commit"];
  CHECK(!commit.empty());
  const specdec::testing::TempDir dir;
  const CostTable back = CostTable::load(dir.write("gpu.json", t.to_json().dump(2)));
  CHECK(back.metadata["machine"] == "NVIDIA H100 80GB HBM3");
  CHECK(back.metadata["commit"] == commit);
  CHECK(back.plain_seconds(128) == Approx(7900e-6));
  CHECK_THAT(back.describe(), Contains("synthetic:Llama-2-7B") && Contains("NVIDIA H100 80GB HBM3") && Contains(date));
}

TEST_CASE("without NVML the energy meter says so, and the report says energy: NVML not available") {
  const EnergyMeter meter("00000000:01:00.0", "libspecdec-no-such-nvml.so.1");
  CHECK_FALSE(meter.available());
  CHECK_THAT(meter.why(), Contains("libspecdec-no-such-nvml.so.1 cannot be loaded"));
  CHECK(meter.joules() == std::nullopt);
  EnergyTotal speculative, plain;
  speculative.add(meter.joules(), meter.joules(), 100);
  CHECK_FALSE(speculative.measured());
  CHECK_THAT(energy_line(meter.available(), meter.why(), speculative, plain),
             StartsWith("energy: NVML not available (libspecdec-no-such-nvml"));
  const nlohmann::ordered_json j = energy_json(meter.available(), meter.why(), speculative, plain);
  CHECK(j["available"] == false);
}

TEST_CASE("joules per token: the counter's differences over the passes' tokens, speculative against plain") {
  EnergyTotal speculative, plain;
  speculative.add(1000.0, 1030.0, 100);  // 0.3 J/token
  speculative.add(2000.0, 2010.0, 100);  // 40 J over 200 tokens: 0.2 J/token
  plain.add(500.0, 580.0, 100);          // 0.8 J/token
  CHECK(speculative.measured());
  CHECK(speculative.per_token() == Approx(0.2));
  CHECK(plain.per_token() == Approx(0.8));
  CHECK_THAT(energy_line(true, "", speculative, plain),
             Contains("0.2 J/token speculative, 0.8 J/token plain: 0.250x plain's"));
  const nlohmann::ordered_json j = energy_json(true, "", speculative, plain);
  CHECK(j["ratio"].get<double>() == Approx(0.25));
  CHECK(j["joules"]["speculative"].get<double>() == Approx(40));
  CHECK(j["tokens"]["plain"] == 100);
  // A failed read spoils a total.
  EnergyTotal broken;
  broken.add(1.0, std::nullopt, 10);
  CHECK_FALSE(broken.measured());
  CHECK(broken.joules == 0);
  CHECK(broken.tokens == 10);
  EnergyTotal none;
  CHECK(none.per_token() == 0);
  CHECK_FALSE(none.measured());
  CHECK_THAT(energy_line(true, "", broken, plain), StartsWith("energy: not measured"));
  CHECK(energy_json(true, "", broken, plain)["measured"] == false);
}

TEST_CASE("a step's parts: drafting and the device's copy in, forward, verify+compact and copy out, per step") {
  ModelRun run;
  run.turns.resize(2);
  for (ModelTurn& turn : run.turns) {
    specdec::DecodeStats& s = turn.result.stats;
    s.steps = 50;
    s.draft_seconds = 0.001;  // 20 us a step over both turns
    s.backend_phases = {0.0005, 0.25, 0.002, 0.0004};
  }
  const StepParts parts = step_parts(run);
  CHECK(parts.steps == 100);
  CHECK(parts.backend.forward == Approx(0.5));
  CHECK_THAT(step_parts_line(parts, "CUDA events"), Contains("(100 steps): drafting 20.0 (host), copy in 10.0, forward 5000.0, "
                                              "verify+compact 40.0, copy out 8.0 (device, CUDA events)"));
  const nlohmann::ordered_json j = step_parts_json(parts);
  CHECK(j["steps"] == 100);
  CHECK(j["seconds"]["verify_compact"].get<double>() == Approx(0.004));
  CHECK(step_parts_line(step_parts(ModelRun{}), "CUDA events") == "step parts: no step");
}
