// Finds a model's directory from what a user typed: a local path, or a
// Hugging Face repo id resolved offline in the Hugging Face cache
// (io/hf_cache). Never downloads: `lily pull` does.
#pragma once

#include <string>

namespace lily {

// Throws lily::Error saying where it looked and how to get the model.
std::string locate_model(const std::string& path_or_repo);

}  // namespace lily
