// Finds a model's directory from what a user typed: a local path, or a
// Hugging Face repo id resolved offline in the Hugging Face cache
// ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub). Never downloads.
#pragma once

#include <string>

namespace lily {

// Throws lily::Error saying where it looked and how to get the model.
std::string locate_model(const std::string& path_or_repo);

}  // namespace lily
