#include "dedloc/train/task.hpp"

namespace dedloc::train {

bool Task::decays(const std::string& parameter_name) const {
  // The usual rule for LAMB/AdamW recipes: no decay on biases and normalization layers.
  auto ends_with = [&](std::string_view suffix) {
    return parameter_name.size() >= suffix.size() &&
           parameter_name.compare(parameter_name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with("bias")) return false;
  return parameter_name.find("norm") == std::string::npos && parameter_name.find("LayerNorm") == std::string::npos;
}

}  // namespace dedloc::train
