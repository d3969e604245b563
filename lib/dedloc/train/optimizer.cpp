#include "dedloc/train/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace dedloc::train {

namespace {

std::string number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

Status bad(const std::string& key, const std::string& what) {
  return error(Code::kInvalidArgument, "optimizer." + key + " " + what);
}

// kInvalidArgument unless lo ≤ value < hi (hi_open) or lo ≤ value ≤ hi, and (lo_open) value ≠ lo.
Status check_range(const std::string& key, double value, double lo, bool lo_open, double hi, bool hi_open) {
  bool ok = std::isfinite(value) && (lo_open ? value > lo : value >= lo);
  if (std::isfinite(hi)) ok = ok && (hi_open ? value < hi : value <= hi);
  if (ok) return Status::ok();
  std::string range = std::isfinite(hi) ? "in " + std::string(lo_open ? "(" : "[") + number(lo) + ", " + number(hi) +
                                              (hi_open ? ")" : "]")
                                        : std::string(lo_open ? "> " : "≥ ") + number(lo);
  return bad(key, "must be " + range + " (got " + number(value) + ")");
}

constexpr double kNoLimit = INFINITY;

// What every kind shares: the parameters with their per-parameter flags and statistics, the step counter,
// and the scratch space that keeps step() free of allocations.
struct Slot {
  std::string name;
  torch::Tensor param;
  bool decays = true;            // weight decay applies (the decays() predicate)
  bool adapts = true;            // lamb, lars: the trust ratio applies
  torch::Tensor first;           // sgd, lars: the momentum buffer (undefined without momentum); lamb: m
  torch::Tensor second;          // lamb: v
  torch::Tensor scratch;         // a view of the shared scratch buffer with the parameter's shape
  torch::Tensor norms;           // {2}, on the parameter's device: ‖w‖ and ‖u‖ (or ‖g‖) for one step
  torch::Tensor norm_a, norm_b;  // views of norms[0], norms[1] (out= targets)
  torch::Tensor norms_host;      // {2} float64 on the CPU, where the norms are read
};

class OptimizerBase : public Optimizer {
 public:
  OptimizerBase(OptimizerOptions options, std::vector<Slot> slots)
      : options_(std::move(options)), slots_(std::move(slots)), step_(torch::zeros({1}, torch::kFloat32)) {}

  void step(double lr) override {
    torch::NoGradGuard no_grad;
    step_.add_(1);
    const double t = static_cast<double>(step_.data_ptr<float>()[0]);
    for (auto& slot : slots_) {
      const torch::Tensor& grad = slot.param.grad();
      if (!grad.defined()) continue;
      update(slot, grad, lr, t);
    }
  }

  NamedTensors state() override {
    NamedTensors out;
    append_state(out);
    out.emplace_back("step", step_);
    return out;
  }

 protected:
  virtual void update(Slot& slot, const torch::Tensor& grad, double lr, double t) = 0;
  virtual void append_state(NamedTensors& out) = 0;

  double decay(const Slot& slot) const { return slot.decays ? options_.weight_decay : 0.0; }

  // ‖a‖ and ‖b‖, read back to the host in one copy.
  static std::pair<double, double> norms(Slot& slot, const torch::Tensor& a, const torch::Tensor& b) {
    at::linalg_vector_norm_out(slot.norm_a, a);
    at::linalg_vector_norm_out(slot.norm_b, b);
    slot.norms_host.copy_(slot.norms);
    const double* host = slot.norms_host.data_ptr<double>();
    return {host[0], host[1]};
  }

  // "weight_decay=0.01 on 12 of 20 parameters" (empty without weight decay).
  std::string describe_decay() const {
    if (options_.weight_decay == 0) return "";
    return "weight_decay=" + number(options_.weight_decay) + " on " + count(&Slot::decays);
  }
  std::string count(bool Slot::*flag) const {
    auto n = std::count_if(slots_.begin(), slots_.end(), [&](const Slot& s) { return s.*flag; });
    return std::to_string(n) + " of " + std::to_string(slots_.size()) + " parameters";
  }
  static std::string join(const std::string& kind, const std::vector<std::string>& parts) {
    std::string out = kind + "(";
    bool first = true;
    for (const auto& part : parts) {
      if (part.empty()) continue;
      if (!first) out += ", ";
      out += part;
      first = false;
    }
    return out + ")";
  }

  OptimizerOptions options_;
  std::vector<Slot> slots_;
  torch::Tensor step_;
};

// torch.optim.SGD (dampening 0), with the same tensor operations so that the results are bitwise equal.
class Sgd final : public OptimizerBase {
 public:
  using OptimizerBase::OptimizerBase;

  std::string describe() const override {
    return join("sgd", {options_.momentum > 0 ? "momentum=" + number(options_.momentum) : "",
                        options_.nesterov ? "nesterov" : "", describe_decay()});
  }

 private:
  void update(Slot& slot, const torch::Tensor& grad, double lr, double /*t*/) override {
    const double wd = decay(slot);
    const torch::Tensor* d = &grad;
    if (wd != 0) {
      at::add_out(slot.scratch, grad, slot.param, wd);  // torch: d_p = d_p.add(p, weight_decay)
      d = &slot.scratch;
    }
    if (options_.momentum > 0) {
      slot.first.mul_(options_.momentum).add_(*d);  // torch: buf.mul_(momentum).add_(d_p, 1 - dampening)
      if (options_.nesterov) {
        at::add_out(slot.scratch, *d, slot.first, options_.momentum);  // torch: d_p = d_p.add(buf, momentum)
        d = &slot.scratch;
      } else {
        d = &slot.first;
      }
    }
    slot.param.add_(*d, -lr);
  }

  void append_state(NamedTensors& out) override {
    if (options_.momentum == 0) return;
    for (const auto& slot : slots_) out.emplace_back("momentum_buffer/" + slot.name, slot.first);
  }
};

class Lamb final : public OptimizerBase {
 public:
  using OptimizerBase::OptimizerBase;

  std::string describe() const override {
    const auto& o = options_;
    return join("lamb", {"beta1=" + number(o.beta1), "beta2=" + number(o.beta2), "epsilon=" + number(o.epsilon),
                         describe_decay(),
                         o.max_trust_ratio > 0 ? "max_trust_ratio=" + number(o.max_trust_ratio) : "unclamped",
                         o.lamb_exclude_no_decay ? "trust ratio on " + count(&Slot::adapts) : "",
                         o.bias_correction ? "" : "no bias correction"});
  }

 private:
  void update(Slot& slot, const torch::Tensor& grad, double lr, double t) override {
    const auto& o = options_;
    torch::Tensor& m = slot.first;
    torch::Tensor& v = slot.second;
    torch::Tensor& u = slot.scratch;
    m.mul_(o.beta1).add_(grad, 1 - o.beta1);
    v.mul_(o.beta2).addcmul_(grad, grad, 1 - o.beta2);
    at::sqrt_out(u, v);
    if (o.bias_correction) u.div_(std::sqrt(1 - std::pow(o.beta2, t)));  // √v̂
    u.add_(o.epsilon);
    at::div_out(u, m, u);
    if (o.bias_correction) u.div_(1 - std::pow(o.beta1, t));  // u = m̂ / (√v̂ + ε)
    const double wd = decay(slot);
    if (wd != 0) u.add_(slot.param, wd);
    double ratio = 1;
    if (slot.adapts) {
      auto [w_norm, u_norm] = norms(slot, slot.param, u);
      if (w_norm > 0 && u_norm > 0) ratio = w_norm / u_norm;
      if (o.max_trust_ratio > 0) ratio = std::min(ratio, o.max_trust_ratio);
    }
    slot.param.add_(u, -lr * ratio);
  }

  void append_state(NamedTensors& out) override {
    for (const auto& slot : slots_) {
      out.emplace_back("exp_avg/" + slot.name, slot.first);
      out.emplace_back("exp_avg_sq/" + slot.name, slot.second);
    }
  }
};

// SGD with momentum on a layer-wise scaled gradient (apex's LARC as SwAV uses it).
class Lars final : public OptimizerBase {
 public:
  using OptimizerBase::OptimizerBase;

  std::string describe() const override {
    const auto& o = options_;
    return join("lars", {o.momentum > 0 ? "momentum=" + number(o.momentum) : "",
                         "trust_coefficient=" + number(o.trust_coefficient), o.lars_clip ? "clip" : "",
                         describe_decay(), "adaptation on " + count(&Slot::adapts)});
  }

 private:
  void update(Slot& slot, const torch::Tensor& grad, double lr, double /*t*/) override {
    const auto& o = options_;
    const double wd = decay(slot);
    double local = 1;
    if (slot.adapts) {
      auto [w_norm, g_norm] = norms(slot, slot.param, grad);
      const double denominator = g_norm + wd * w_norm;
      if (w_norm > 0 && denominator > 0) local = o.trust_coefficient * w_norm / denominator;
      if (o.lars_clip) local = lr > 0 ? std::min(local / lr, 1.0) : 1.0;
    }
    torch::Tensor& d = slot.scratch;
    if (wd != 0) {
      at::add_out(d, grad, slot.param, wd);
    } else {
      d.copy_(grad);
    }
    if (local != 1) d.mul_(local);
    if (o.momentum > 0) {
      slot.first.mul_(o.momentum).add_(d);
      slot.param.add_(slot.first, -lr);
    } else {
      slot.param.add_(d, -lr);
    }
  }

  void append_state(NamedTensors& out) override {
    if (options_.momentum == 0) return;
    for (const auto& slot : slots_) out.emplace_back("momentum_buffer/" + slot.name, slot.first);
  }
};

// make_optimizer after its checks: the allocations, which torch reports by exceptions.
std::unique_ptr<Optimizer> build_optimizer(const OptimizerOptions& options, NamedTensors parameters,
                                           const std::function<bool(const std::string&)>& decays) {
  const bool lamb = options.kind == "lamb", lars = options.kind == "lars";
  const bool momentum = !lamb && options.momentum > 0;
  const bool trust = lamb || lars;
  const bool scratch = trust || options.weight_decay > 0 || options.nesterov;

  torch::NoGradGuard no_grad;
  // One scratch buffer per device and dtype, as large as the largest parameter there.
  std::vector<std::pair<torch::TensorOptions, std::int64_t>> sizes;
  auto scratch_index = [&](const torch::Tensor& t) {
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i].first.device() == t.device() && sizes[i].first.dtype() == t.dtype()) return i;
    sizes.emplace_back(t.options(), 0);
    return sizes.size() - 1;
  };
  for (const auto& entry : parameters) {
    auto& size = sizes[scratch_index(entry.second)].second;
    size = std::max(size, entry.second.numel());
  }
  std::vector<torch::Tensor> buffers;
  if (scratch)
    for (const auto& [tensor_options, size] : sizes) buffers.push_back(torch::empty({size}, tensor_options));

  std::vector<Slot> slots;
  slots.reserve(parameters.size());
  for (auto& [name, tensor] : parameters) {
    Slot slot;
    slot.name = name;
    slot.param = tensor;
    slot.decays = !decays || decays(name);
    slot.adapts = (lamb && (!options.lamb_exclude_no_decay || slot.decays)) ||
                  (lars && (!options.lars_exclude_no_decay || slot.decays));
    const auto zeros = [&] { return torch::zeros_like(tensor, torch::MemoryFormat::Contiguous); };
    if (momentum || lamb) slot.first = zeros();
    if (lamb) slot.second = zeros();
    if (scratch) slot.scratch = buffers[scratch_index(tensor)].narrow(0, 0, tensor.numel()).view(tensor.sizes());
    if (trust) {
      slot.norms = torch::zeros({2}, tensor.options());
      slot.norm_a = slot.norms.select(0, 0);
      slot.norm_b = slot.norms.select(0, 1);
      slot.norms_host = torch::zeros({2}, torch::dtype(torch::kFloat64));
    }
    slots.push_back(std::move(slot));
  }

  std::unique_ptr<Optimizer> optimizer;
  if (lamb) {
    optimizer = std::make_unique<Lamb>(options, std::move(slots));
  } else if (lars) {
    optimizer = std::make_unique<Lars>(options, std::move(slots));
  } else {
    optimizer = std::make_unique<Sgd>(options, std::move(slots));
  }
  return optimizer;
}

}  // namespace

void read_optimizer_options(ConfigReader& section, OptimizerOptions& options) {
  section.read("kind", options.kind);
  section.read("weight_decay", options.weight_decay);
  const bool sgd = options.kind == "sgd", lamb = options.kind == "lamb", lars = options.kind == "lars";
  // An unknown kind reads every key, so that check_optimizer_options reports the kind, not a key.
  const bool all = !sgd && !lamb && !lars;
  if (sgd || lars || all) section.read("momentum", options.momentum);
  if (sgd || all) section.read("nesterov", options.nesterov);
  if (lamb || all) {
    section.read("beta1", options.beta1);
    section.read("beta2", options.beta2);
    section.read("epsilon", options.epsilon);
    section.read("bias_correction", options.bias_correction);
    section.read("max_trust_ratio", options.max_trust_ratio);
    section.read("lamb_exclude_no_decay", options.lamb_exclude_no_decay);
  }
  if (lars || all) {
    section.read("trust_coefficient", options.trust_coefficient);
    section.read("lars_clip", options.lars_clip);
    section.read("lars_exclude_no_decay", options.lars_exclude_no_decay);
  }
}

Status check_optimizer_options(const OptimizerOptions& o) {
  if (o.kind != "sgd" && o.kind != "lamb" && o.kind != "lars")
    return bad("kind", "must be sgd, lamb or lars (got '" + o.kind + "')");
  DEDLOC_RETURN_IF_ERROR(check_range("momentum", o.momentum, 0, false, 1, true));
  if (o.kind == "lamb" && o.momentum != 0)
    return bad("momentum", "applies to sgd and lars; lamb's first moment decays at beta1");
  if (o.nesterov && o.kind != "sgd") return bad("nesterov", "applies to sgd only (the kind is " + o.kind + ")");
  if (o.nesterov && o.momentum == 0) return bad("nesterov", "needs momentum > 0");
  DEDLOC_RETURN_IF_ERROR(check_range("weight_decay", o.weight_decay, 0, false, kNoLimit, false));
  DEDLOC_RETURN_IF_ERROR(check_range("beta1", o.beta1, 0, false, 1, true));
  DEDLOC_RETURN_IF_ERROR(check_range("beta2", o.beta2, 0, false, 1, true));
  DEDLOC_RETURN_IF_ERROR(check_range("epsilon", o.epsilon, 0, true, kNoLimit, false));
  DEDLOC_RETURN_IF_ERROR(check_range("max_trust_ratio", o.max_trust_ratio, 0, false, kNoLimit, false));
  DEDLOC_RETURN_IF_ERROR(check_range("trust_coefficient", o.trust_coefficient, 0, true, kNoLimit, false));
  return Status::ok();
}

Result<std::unique_ptr<Optimizer>> make_optimizer(const OptimizerOptions& options, NamedTensors parameters,
                                                  std::function<bool(const std::string&)> decays) {
  DEDLOC_RETURN_IF_ERROR(check_optimizer_options(options));
  if (parameters.empty()) return error(Code::kInvalidArgument, "an optimizer needs at least one parameter");
  std::set<std::string> names;
  for (const auto& [name, tensor] : parameters) {
    if (!names.insert(name).second)
      return error(Code::kInvalidArgument, "parameter '" + name + "' is given twice to the optimizer");
    if (!tensor.defined()) return error(Code::kInvalidArgument, "parameter '" + name + "' is an undefined tensor");
    if (!tensor.is_floating_point())
      return error(Code::kInvalidArgument, "parameter '" + name + "' is not a floating-point tensor");
  }

  try {
    return build_optimizer(options, std::move(parameters), decays);
  } catch (const c10::Error& e) {  // out of memory on the parameters' device, most likely
    return error(Code::kInternal, "allocating the optimizer's state: " + std::string(e.what_without_backtrace()));
  }
}

}  // namespace dedloc::train
