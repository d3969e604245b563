// CenteredClip (Karimireddy, He & Jaggi, "Learning from History for Byzantine Robust Optimization", 2021;
// used per reducer in "Secure Distributed Training at Scale", Gorbunov et al., 2022): a robust weighted
// average that a few poisoned contributions cannot drag far.
//
// Starting from the coordinate-wise median v, it repeats for a fixed number of iterations
//
//     v ← v + Σ_i w_i · (x_i − v) · min(1, τ / ‖x_i − v‖₂) / Σ_i w_i
//
// Each contribution pulls v toward itself by at most τ (its weight's share of it), however far away it is.
// Why that bounds an attacker: at the fixed point the honest pulls balance the clipped ones. With every
// honest x_h within τ of v (no honest clipping), Σ_h w_h (x_h − v) + Σ_b w_b τ u_b = 0, so
//
//     ‖v − honest weighted mean‖ ≤ τ · W_bad / W_honest
//
// which is below τ while the attackers hold less weight than the honest peers. When nobody is clipped one
// step lands exactly on the weighted mean, so honest rounds average as before. τ is a length in the space
// of one part (a reducer clips the parts it reduces, each on its own), so it should exceed the honest
// spread of a part: too small and honest contributions are clipped too, which shrinks their pull.
//
// Cost: the reducer keeps every contribution of a part until the part is complete (it does already, to
// answer each sender) and decodes them into one buffer: n × part floats; each iteration reads them all
// twice (a norm, then the update), so a part costs about 2 · iterations passes over n × part floats where
// the plain mean costs one. Measured in bench/allreduce (codec_bench: "centered-clip").
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "dedloc/core/status.hpp"

namespace dedloc::avg {

struct CenteredClipOptions {
  double tau = 1.0;        // the clipping radius: L2 length, in the space of one part
  size_t iterations = 10;  // fixed: a round must not take an attacker-chosen time
};

// Checks the options (tau > 0 and finite, 1 <= iterations <= 1000); the message names the field.
Status check(const CenteredClipOptions& options);

// Writes the CenteredClip average of `count` points of `dim` floats each (row-major in `points`), weighted
// by `weights` (count of them, each >= 0, not all 0), into `out` (dim floats, not overlapping `points`).
// `scratch`: reused between calls (grows to `dim` floats).
void centered_clip(std::span<const float> points, size_t dim, std::span<const double> weights,
                   const CenteredClipOptions& options, std::span<float> out, std::vector<float>& scratch);

}  // namespace dedloc::avg
