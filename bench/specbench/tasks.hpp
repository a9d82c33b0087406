// The prompt sets (tasks) of `specbench model`, and the seed openings of `specbench corpus`.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace specbench {

/// A named set of text prompts.
struct Task {
  std::string name;
  std::string description;
  std::vector<std::string> prompts;
};

/// The built-in tasks, for TinyStories models: `stories` (story openings) and `retell` (a short
/// story, then the start of its retelling: its continuation copies from the prompt).
const std::vector<Task>& builtin_tasks();

/// The tasks named (each once, in built-in order; "all" names every task). `names` may hold
/// comma-separated lists ("stories, retell": specdec::tools::list_items); a name matches
/// regardless of case. Throws input_error naming an unknown task and listing the known ones.
std::vector<const Task*> find_tasks(std::span<const std::string> names);

/// A task read from a text file: one prompt per non-empty line, the two characters \n standing
/// for a line break; named after the file's stem. Throws input_error for a missing or empty file.
Task load_task(const std::string& path);

/// Story openings for generating a corpus, disjoint from every task's prompts (other names,
/// other sentences), in a fixed order.
std::vector<std::string> corpus_openings();

}  // namespace specbench
