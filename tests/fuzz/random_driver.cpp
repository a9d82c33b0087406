// A bounded, deterministic stand-in for libFuzzer's driver, built with any compiler: replays
// every file given (the committed regression inputs and seeds), then runs mutations of them.
//
//   TARGET_random [--runs N] [--seconds S] [--seed K] [--keep] FILE_OR_DIR...
//
// Runs are deterministic for a seed: a failing run repeats with the same arguments; --keep writes
// each input to fuzz-last-input before running it (to keep the input a sanitizer aborts on).
// Mutations: flipped, set, inserted, erased and duplicated bytes, 32-bit fields set to edge
// values (0, -1, 1, INT_MAX, INT_MIN, 2^20, ...), splices of two inputs. A crash or an escaping
// exception ends the process, after the input is written to fuzz-crash-<run>.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fuzz_target.hpp"

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void mutate(Bytes& b, const std::vector<Bytes>& inputs, std::mt19937_64& rng) {
  static constexpr std::int32_t edges[] = {0, -1, 1, 2, 3, 1024, 1 << 16, 1 << 20, 1 << 24, INT32_MAX, INT32_MIN, -2};
  static constexpr char tokens[] = "{}[]\",:0123456789e-+.\\un\"tfa{}\n \t";
  auto pick = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };
  for (int m = 0, count = 1 + static_cast<int>(rng() % 6); m < count; ++m) {
    switch (rng() % 8) {
      case 0:
        if (!b.empty()) b[pick(b.size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        if (!b.empty()) b[pick(b.size())] = static_cast<std::uint8_t>(rng());
        break;
      case 2:
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)),
                 static_cast<std::uint8_t>(tokens[pick(sizeof tokens - 1)]));
        break;
      case 3:
        if (!b.empty()) {
          const std::size_t at = pick(b.size()), n = std::min(b.size() - at, 1 + pick(16));
          b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        break;
      case 4:
        if (!b.empty() && b.size() < (1u << 20)) {
          const std::size_t at = pick(b.size()), n = std::min(b.size() - at, 1 + pick(64));
          const Bytes part(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), part.begin(), part.end());
        }
        break;
      case 5:
      case 6:  // binary headers are 32-bit fields: the likeliest place for size arithmetic bugs
        if (b.size() >= 4) {
          const std::size_t at = rng() % 2 ? pick(std::min<std::size_t>(b.size() / 4, 8)) * 4 : pick(b.size() - 3);
          const std::int32_t v = edges[pick(std::size(edges))];
          std::memcpy(b.data() + at, &v, 4);
        }
        break;
      default: {
        const Bytes& other = inputs[pick(inputs.size())];
        const std::size_t keep = pick(b.size() + 1), from = pick(other.size() + 1);
        b.resize(keep);
        b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  long runs = 1000;
  double seconds = 10;
  std::uint64_t seed = 1;
  bool keep = false;
  std::vector<Bytes> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--runs" && i + 1 < argc) runs = std::stol(argv[++i]);
    else if (arg == "--seconds" && i + 1 < argc) seconds = std::stod(argv[++i]);
    else if (arg == "--seed" && i + 1 < argc) seed = std::stoull(argv[++i]);
    else if (arg == "--keep") keep = true;
    else if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());  // a deterministic order
      for (const auto& f : files) inputs.push_back(read(f));
    } else {
      inputs.push_back(read(arg));
    }
  }
  if (inputs.empty()) inputs.emplace_back();
  // An exception escaping the target is a failure: the input is written to `name`.
  auto run = [](const Bytes& b, const std::string& name) {
    try {
      LLVMFuzzerTestOneInput(b.data(), b.size());
      return true;
    } catch (const std::exception& e) {
      std::ofstream(name, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
      std::fprintf(stderr, "uncaught %s; input written to %s\n", e.what(), name.c_str());
      return false;
    }
  };
  // Every given input as it is: the seeds and the regression cases.
  for (std::size_t i = 0; i < inputs.size(); ++i)
    if (!run(inputs[i], "fuzz-failed-input-" + std::to_string(i))) return 1;
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  long done = 0;
  Bytes b;
  for (; done < runs; ++done) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) break;
    b = inputs[rng() % inputs.size()];
    mutate(b, inputs, rng);
    if (keep)
      std::ofstream("fuzz-last-input", std::ios::binary)
          .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!run(b, "fuzz-crash-" + std::to_string(done))) return 1;
  }
  std::printf("%zu inputs replayed, %ld mutated runs (seed %llu)\n", inputs.size(), done,
              static_cast<unsigned long long>(seed));
  return 0;
}
