// A small linear / mixed-integer program on lpsolve 5.5, behind RAII. lp_lib.h defines macros such as
// TRUE, REAL, LE and NORMAL, so lp_solver.cpp is the only file that includes it.
//
// Columns are numbered from 0 here (lpsolve counts from 1). Every column starts continuous in
// [0, +inf). lpsolve's messages are silenced; its return codes become Status values.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "dedloc/core/status.hpp"

namespace dedloc::plan {

enum class RowType { kLessEqual, kGreaterEqual, kEqual };

struct LpSolution {
  std::vector<double> values;  // one per column
  double objective = 0;
  bool proven_optimal = false;  // false: a MILP's best solution when the time limit stopped the search
};

class LinearProgram {
 public:
  // Errors: lpsolve could not allocate the problem.
  [[nodiscard]] static Result<LinearProgram> create(int columns);
  LinearProgram(LinearProgram&&) noexcept;
  LinearProgram& operator=(LinearProgram&&) noexcept;
  ~LinearProgram();

  void set_bounds(int column, double lower, double upper);
  void set_binary(int column);
  // Sets the objective to maximize. Call before the first add_row().
  void maximize(std::span<const int> columns, std::span<const double> coefficients);
  void add_row(std::span<const int> columns, std::span<const double> coefficients, RowType type, double rhs);

  // Solves within `timeout_seconds` (rounded up to whole seconds: lpsolve's granularity).
  // Errors: kInfeasible (no feasible point), kTimeout (limit hit before any solution), kInternal
  // (unbounded, numerical failure, out of memory: a modelling bug or a degenerate input).
  [[nodiscard]] Result<LpSolution> solve(double timeout_seconds);

 private:
  struct Impl;
  explicit LinearProgram(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dedloc::plan
