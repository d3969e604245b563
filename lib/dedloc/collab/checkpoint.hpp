// Checkpoints: a peer's training state (parameters, buffers, optimizer statistics, epoch, scheduler
// position) on disk, in the safetensors format, so the same file both resumes a dedloc run (`--resume`)
// and loads in the PyTorch / Hugging Face world (safetensors.torch.load_file).
//
// Layout (https://github.com/huggingface/safetensors): an 8-byte little-endian header length, a JSON header
// {"<tensor>": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
// padded with spaces to a multiple of 8, then the tensors' bytes back to back in the state's order.
// __metadata__ (all strings, as the format requires) holds:
//   "format": "dedloc-checkpoint-v1", "epoch", "schema_hash" (hex), "checksum" (BLAKE2b-256 hex of the
//   data bytes: a corrupt or truncated file is refused, never half-loaded), "entries" (the state's metadata
//   entries as JSON), and whatever the caller adds (the run id, the recipe).
// Written atomically (temporary file, fsync, rename): a crash leaves the previous checkpoint intact.
#pragma once

#include <map>
#include <string>

#include "dedloc/avg/training_state.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::collab {

struct Checkpoint {
  avg::TrainingState state;
  std::map<std::string, std::string> extra;  // the caller's metadata ("run_id", "recipe", ...)
};

// Extra keys must not collide with the reserved ones above (kInvalidArgument).
Status save_checkpoint(const std::string& path, const avg::TrainingState& state,
                       const std::map<std::string, std::string>& extra = {});

// kNotFound for a missing file; kMalformed naming the file and the problem for anything else that is not a
// whole, intact dedloc checkpoint (bad header, offsets that overlap or leave holes, wrong dtype, checksum).
Result<Checkpoint> load_checkpoint(const std::string& path);

}  // namespace dedloc::collab
