// Process-wide memory policy for the processes that move or compute on large buffers.
#pragma once

namespace dedloc {

// Keeps memory the process frees mapped, instead of glibc's defaults, which serve every allocation over
// its (adaptive) mmap threshold with a fresh mmap() and give freed heap memory back to the system (trim):
// each reuse then lands in fresh pages, ≈ 10 µs per 4 KiB page on these machines. That is every part
// ZeroMQ receives during averaging (measured: a 4-peer 64 MiB round took 3.6x longer) and most of the
// activations and gradients libtorch allocates in a training step (measured: an ALBERT-tiny step 15-25%
// slower). The cost: memory the process frees stays mapped, up to its peak use; allocations over 32 MiB
// still get their own mapping. Idempotent; a no-op outside glibc.
void keep_freed_memory();

}  // namespace dedloc
