#include "dedloc/plan/lp_solver.hpp"

#include <cmath>
#include <string>

#include <lp_lib.h>

namespace dedloc::plan {

struct LinearProgram::Impl {
  lprec* lp = nullptr;
  int columns = 0;
  bool in_row_mode = false;
  bool failed = false;  // an lpsolve call refused its input (bad index, no memory): reported by solve()
  ~Impl() {
    if (lp) delete_lp(lp);
  }
};

LinearProgram::LinearProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LinearProgram::LinearProgram(LinearProgram&&) noexcept = default;
LinearProgram& LinearProgram::operator=(LinearProgram&&) noexcept = default;
LinearProgram::~LinearProgram() = default;

Result<LinearProgram> LinearProgram::create(int columns) {
  auto impl = std::make_unique<Impl>();
  impl->lp = make_lp(0, columns);
  if (!impl->lp) return error(Code::kInternal, "lpsolve: cannot allocate a program with " + std::to_string(columns) + " columns");
  impl->columns = columns;
  set_verbose(impl->lp, NEUTRAL);
  set_outputfile(impl->lp, const_cast<char*>(""));
  return LinearProgram(std::move(impl));
}

void LinearProgram::set_bounds(int column, double lower, double upper) {
  impl_->failed |= !::set_bounds(impl_->lp, column + 1, lower, std::isinf(upper) ? get_infinite(impl_->lp) : upper);
}

void LinearProgram::set_binary(int column) { impl_->failed |= !::set_binary(impl_->lp, column + 1, TRUE); }

namespace {
// lpsolve takes mutable arrays of 1-based column numbers.
std::vector<int> one_based(std::span<const int> columns) {
  std::vector<int> out(columns.begin(), columns.end());
  for (int& c : out) c += 1;
  return out;
}
}  // namespace

void LinearProgram::maximize(std::span<const int> columns, std::span<const double> coefficients) {
  auto cols = one_based(columns);
  std::vector<REAL> coefs(coefficients.begin(), coefficients.end());
  impl_->failed |= !set_obj_fnex(impl_->lp, static_cast<int>(cols.size()), coefs.data(), cols.data());
  set_maxim(impl_->lp);
}

void LinearProgram::add_row(std::span<const int> columns, std::span<const double> coefficients, RowType type,
                            double rhs) {
  if (!impl_->in_row_mode) {
    set_add_rowmode(impl_->lp, TRUE);  // fast path for building row by row
    impl_->in_row_mode = true;
  }
  auto cols = one_based(columns);
  std::vector<REAL> coefs(coefficients.begin(), coefficients.end());
  int lp_type = type == RowType::kLessEqual ? LE : type == RowType::kGreaterEqual ? GE : EQ;
  impl_->failed |=
      !add_constraintex(impl_->lp, static_cast<int>(cols.size()), coefs.data(), cols.data(), lp_type, rhs);
}

Result<LpSolution> LinearProgram::solve(double timeout_seconds) {
  if (impl_->in_row_mode) {
    set_add_rowmode(impl_->lp, FALSE);
    impl_->in_row_mode = false;
  }
  if (impl_->failed) return error(Code::kInternal, "lpsolve refused part of the program while it was built");
  set_timeout(impl_->lp, static_cast<long>(std::ceil(std::max(timeout_seconds, 1.0))));
  int result = ::solve(impl_->lp);
  switch (result) {
    case OPTIMAL:
    case PRESOLVED:
    case SUBOPTIMAL: {
      LpSolution solution;
      solution.values.resize(static_cast<std::size_t>(impl_->columns));
      if (!get_variables(impl_->lp, solution.values.data())) {
        return error(Code::kInternal, "lpsolve: no solution values after solve");
      }
      solution.objective = get_objective(impl_->lp);
      solution.proven_optimal = result != SUBOPTIMAL;
      return solution;
    }
    case INFEASIBLE: return error(Code::kInfeasible, "lpsolve: the program is infeasible");
    case UNBOUNDED: return error(Code::kInternal, "lpsolve: the program is unbounded");
    case TIMEOUT: return error(Code::kTimeout, "lpsolve: no solution within the time limit");
    case NUMFAILURE: return error(Code::kInternal, "lpsolve: numerical failure");
    case NOMEMORY: return error(Code::kInternal, "lpsolve: out of memory");
    default: return error(Code::kInternal, "lpsolve: solve() returned " + std::to_string(result));
  }
}

}  // namespace dedloc::plan
