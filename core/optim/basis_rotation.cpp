/// Basis rotation (Jung, Shin and Lee, ICML 2026, arXiv 2602.03515; the authors' code
/// joonkyoo/basis-rotation, optim/basis_rotation.py and optim/optimizer.py; docs/schemes.md,
/// "Basis rotation"): Adam whose second moment lives in an approximate eigenbasis of each
/// weight matrix's gradient statistics, so that stale gradients from a deep asynchronous
/// pipeline hurt less. For a matrix W with gradient g, at step t:
///
///   2nd source: L <- lerp(L, g g^T, 1 - b_s), R <- lerp(R, g^T g, 1 - b_s)
///   every `precondition_frequency` steps (and while there is no basis): refresh U, V
///     (a full eigendecomposition first, then one power iteration and a QR, the rotated
///     second moment permuted to the refreshed order)
///   m <- b1 m + (1 - b1) g                       (original coordinates)
///   v <- b2 v + (1 - b2) (U^T g V)^2             (rotated coordinates)
///   W <- W - lr wd W;  W <- W - lr sqrt(1 - b2^t) / (1 - b1^t) U ((U^T m V) / (sqrt(v) + eps)) V^T
///
/// `uni` rotates one side (the shorter), `bi` both; the `1st` source estimates the bases from
/// the momentum one step ahead (an SVD, then power iterations) instead of the covariances. The
/// arithmetic is the reference code's, in its order. The parameters it does not rotate (by
/// default all but the attention's and the MLPs' matrices: embeddings, the head, biases,
/// norms) go to `fallback`, as the authors' driver hands them to AdamW.
#include <ATen/ATen.h>
#include <fnmatch.h>

#include <cmath>

#include "core/optim/fallback.h"
#include "core/optim/optimizer.h"

namespace pipelab {
namespace {

enum class Geometry { Bilateral, Unilateral };
enum class Source { Second, First };

/// beta1 and beta2: two numbers in [0, 1).
struct RotationBetas {
  std::string operator()(const std::vector<double>& b) const {
    const bool ok = b.size() == 2 && b[0] >= 0 && b[0] < 1 && b[1] >= 0 && b[1] < 1;
    return ok ? "" : "two numbers in [0, 1), e.g. [0.9, 0.999]";
  }
};

/// shampoo_beta: in [0, 1), or negative for beta2.
struct CovarianceRate {
  std::string operator()(double b) const { return b < 1 ? "" : "a number below 1 (negative: beta2's)"; }
};

/// A fallback takes what basis rotation leaves (vectors, the matrices `rotate` does not
/// name): another basis rotation would rotate none of it and hand it all on again.
struct AnotherOptimizer {
  std::string operator()(const std::optional<OptimizerSection>& s) const {
    return s && s->factory->type() == "basis_rotation"
               ? "an optimizer other than basis_rotation, for what it does not rotate (e.g. {type: adamw, lr: 3.0e-4})"
               : "";
  }
};

struct BasisRotationOptions {
  double lr = 3e-3;
  std::vector<double> betas{0.95, 0.95};
  double shampoo_beta = -1;
  double eps = 1e-8;
  double weight_decay = 0.01;
  int64_t precondition_frequency = 10;
  Geometry rotation_geometry = Geometry::Bilateral;
  Source approx_source = Source::Second;
  std::vector<std::string> rotate{"*.attention.*", "*.self_attn.*", "*.attn.*", "*.ff.*", "*.mlp.*"};
  bool float32_basis = false;
  bool left_check_refresh = false;
  std::optional<OptimizerSection> fallback;
  template <class V>
  void fields(V& v) {
    v("lr", lr, "learning rate (the class's default 3e-3; the authors' driver passes --lr)", in_range(0, 1e30));
    v("betas", betas,
      "(beta1, beta2) of the moments (the class's default [0.95, 0.95]; the authors' driver passes [0.9, 0.999])",
      RotationBetas{});
    v("shampoo_beta", shampoo_beta, "decay of the gradient covariances g g^T and g^T g (negative: beta2)",
      CovarianceRate{});
    v("eps", eps, "epsilon added to sqrt(v), before the bias correction", positive);
    v("weight_decay", weight_decay, "decoupled weight decay: W <- W - lr wd W", non_negative);
    v("precondition_frequency", precondition_frequency, "steps between refreshes of the rotation (T_freq)",
      InRange{1, 1000000000});
    v.choice("rotation_geometry", rotation_geometry,
             Choices<Geometry>{{"bi", Geometry::Bilateral}, {"uni", Geometry::Unilateral}},
             "rotate both sides of a matrix (bi) or its shorter side only (uni)");
    v.choice("approx_source", approx_source, Choices<Source>{{"2nd", Source::Second}, {"1st", Source::First}},
             "estimate the bases from the gradient covariances (2nd) or from the momentum (1st)");
    v("rotate", rotate,
      "which matrices are rotated: shell patterns on the stage's parameter names (\"layer3.attention.q_linear."
      "weight\"); the default matches the attention's and the MLPs' (the authors' attn, mlp, sa, ffwd modules); "
      "[\"*\"]: every matrix");
    v("float32_basis", float32_basis,
      "fidelity: keep the covariances and compute the bases in float32 whatever the run's dtype, as the authors' "
      "code does (a float64 run is then not float64 throughout)");
    v("left_check_refresh", left_check_refresh,
      "fidelity: refresh while the left basis is missing, as the authors' code checks; with `uni` on a matrix of "
      "at least as many rows as columns that is every step, not every precondition_frequency");
    v("fallback", fallback,
      "the optimizer of every parameter not rotated (absent: AdamW with this lr, betas and weight_decay, as the "
      "authors' driver makes it)",
      AnotherOptimizer{});
  }
};

/// One rotated matrix's state.
struct Rotated {
  at::Tensor exp_avg, exp_avg_sq, gg_left, gg_right, q_left, q_right;
};

/// A basis estimate: the statistic, the current basis on that side, and which side it is.
struct Estimate {
  at::Tensor matrix, basis;
  int dim = 0;
};

class BasisRotation : public Optimizer {
 public:
  BasisRotation(std::vector<at::Tensor> params, const std::vector<bool>& rotated, const BasisRotationOptions& o,
                const Component& section)
      : Optimizer(std::move(params), o.lr), o_(o), state_(params_.size()),
        fallback_(params_, rotated, o_.fallback, section, "basis rotation rotates the matrices `rotate` names only") {}

  /// The latest update's direction (the rotated Adam step, so that the update was W <- W -
  /// lr d beside the decay), from the state as Adam's is: the same after a resume.
  at::Tensor direction(size_t i, const DirectionRequest& request) const override {
    if (fallback_.owns(i)) return fallback_.direction(i, request);
    const Rotated& r = state_.at(i);
    if (!r.exp_avg.defined() || steps_ == 0) return {};
    const double t = static_cast<double>(steps_);
    const double b1 = o_.betas[0], b2 = o_.betas[1];
    const double scale = std::pow(1.0 - std::pow(b2, t), 0.5) / (1.0 - std::pow(b1, t));
    const at::Tensor denom = r.exp_avg_sq.sqrt().add_(request.eps.value_or(o_.eps));
    return project_back(r, project(r, r.exp_avg) / denom) * scale;
  }
  double decoupled_decay() const override { return o_.weight_decay; }
  void set_steps(int64_t steps) override {
    Optimizer::set_steps(steps);
    fallback_.set_steps(steps);
  }
  std::optional<double> beta1() const override { return o_.betas[0]; }
  void set_beta1(double beta1) override { o_.betas[0] = beta1; }

  std::vector<std::pair<std::string, at::Tensor>> state() const override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < state_.size(); ++i) {
      const Rotated& r = state_[i];
      const std::string at = std::to_string(i) + ".";
      for (const auto& [name, t] : {std::pair{"exp_avg", &r.exp_avg}, {"exp_avg_sq", &r.exp_avg_sq},
                                    {"gg_left", &r.gg_left}, {"gg_right", &r.gg_right}, {"q_left", &r.q_left},
                                    {"q_right", &r.q_right}}) {
        if (t->defined()) out.emplace_back(at + name, *t);
      }
    }
    fallback_.append_state(out);
    return out;
  }

  void load_state(const std::vector<std::pair<std::string, at::Tensor>>& state) override {
    for (size_t i = 0; i < state_.size(); ++i) {
      if (fallback_.owns(i)) continue;
      Rotated& r = state_[i];
      for (const auto& [name, t] : {std::pair{"exp_avg", &r.exp_avg}, {"exp_avg_sq", &r.exp_avg_sq},
                                    {"gg_left", &r.gg_left}, {"gg_right", &r.gg_right}, {"q_left", &r.q_left},
                                    {"q_right", &r.q_right}}) {
        const at::Tensor saved = find_state(state, i, name);
        *t = saved.defined() ? saved.to(params_[i].device()).clone() : at::Tensor();
      }
    }
    fallback_.load_state(state);
  }

 protected:
  at::Tensor update(size_t i, at::Tensor& p, const at::Tensor& g) override;

  std::vector<at::Tensor> update_all(const std::vector<size_t>& index, std::vector<at::Tensor>& params,
                                     const std::vector<at::Tensor>& grads) override {
    std::vector<at::Tensor> consumed;
    bool others = false;
    for (size_t k = 0; k < index.size(); ++k) {
      others = others || fallback_.owns(index[k]);
      consumed.push_back(fallback_.owns(index[k]) ? grads[k] : update(index[k], params[k], grads[k]));
    }
    if (others) fallback_.step(lr_, o_.lr, steps_);
    return consumed;
  }

 private:
  bool uses_left(const at::Tensor& g) const {
    return o_.rotation_geometry == Geometry::Bilateral || g.size(0) < g.size(1);
  }
  bool uses_right(const at::Tensor& g) const {
    return o_.rotation_geometry == Geometry::Bilateral || g.size(0) >= g.size(1);
  }
  /// The dtype the covariances and the bases are computed in.
  at::ScalarType basis_dtype(const at::Tensor& g) const { return o_.float32_basis ? at::kFloat : g.scalar_type(); }
  at::Tensor project(const Rotated& r, at::Tensor x) const;
  at::Tensor project_back(const Rotated& r, at::Tensor x) const;
  void refresh(Rotated& r, const at::Tensor& g, const at::Tensor& momentum) const;
  std::vector<at::Tensor> cold_bases(const std::vector<Estimate>& estimates) const;
  std::vector<at::Tensor> warm_bases(Rotated& r, const std::vector<Estimate>& estimates) const;

  BasisRotationOptions o_;
  std::vector<Rotated> state_;
  Fallback fallback_;
};

at::Tensor BasisRotation::project(const Rotated& r, at::Tensor x) const {
  if (r.q_left.defined()) x = r.q_left.t().matmul(x);
  if (r.q_right.defined()) x = x.matmul(r.q_right);
  return x;
}

at::Tensor BasisRotation::project_back(const Rotated& r, at::Tensor x) const {
  if (r.q_right.defined()) x = x.matmul(r.q_right.t());
  if (r.q_left.defined()) x = r.q_left.matmul(x);
  return x;
}

/// The first bases: the covariances' eigenvectors, largest eigenvalue first (2nd), or the
/// momentum's singular vectors (1st, both sides from one SVD).
std::vector<at::Tensor> BasisRotation::cold_bases(const std::vector<Estimate>& estimates) const {
  std::vector<at::Tensor> out;
  for (const Estimate& e : estimates) {
    if (e.matrix.is_meta()) {
      // A profile on the meta device (tools/simulate/profile_source.h) needs the bases' shapes
      // only, and LibTorch decomposes no meta tensors.
      const int64_t rows = e.matrix.size(0), cols = e.matrix.size(1);
      if (o_.approx_source == Source::First) out.push_back(at::empty({rows, rows}, e.matrix.options()));
      out.push_back(at::empty({cols, cols}, e.matrix.options()));
      continue;
    }
    if (o_.approx_source == Source::First) {
      auto [u, s, vh] = at::linalg_svd(e.matrix, /*full_matrices=*/true);
      out.push_back(u);
      out.push_back(vh.t());
    } else {
      // A jitter of 1e-30 on the diagonal, as the reference code adds.
      const at::Tensor jittered = e.matrix + at::eye(e.matrix.size(0), e.matrix.options()) * 1e-30;
      out.push_back(at::flip(std::get<1>(at::linalg_eigh(jittered)), {1}));
    }
  }
  return out;
}

/// One power iteration from the current bases, each side's columns first sorted by their
/// estimated eigenvalue (the rotated second moment permuted along), then a QR.
std::vector<at::Tensor> BasisRotation::warm_bases(Rotated& r, const std::vector<Estimate>& estimates) const {
  at::Tensor v = r.exp_avg_sq;
  std::vector<at::Tensor> out;
  for (const Estimate& e : estimates) {
    at::Tensor o = e.basis;
    if (o_.approx_source == Source::First) {
      // Q_L from g V (dim 0, the columns of v follow V's order), Q_R from g^T U (dim 1).
      const at::Tensor estimate = at::sum(e.matrix.matmul(o).pow(2), {0});
      const at::Tensor order = at::argsort(estimate, /*dim=*/-1, /*descending=*/true);
      const int64_t k = order.size(0);
      const int64_t axis = e.dim == 0 ? 1 : 0;
      const at::Tensor active = v.narrow(axis, 0, k).index_select(axis, order);
      v = at::cat({active, v.narrow(axis, k, v.size(axis) - k)}, axis);
      o = o.index_select(1, order);
      out.push_back(std::get<0>(at::linalg_qr(e.matrix.matmul(o), "complete")));
    } else {
      const at::Tensor estimate = at::diag(o.t().matmul(e.matrix).matmul(o));
      const at::Tensor order = at::argsort(estimate, /*dim=*/-1, /*descending=*/true);
      v = v.index_select(e.dim, order);
      o = o.index_select(1, order);
      out.push_back(std::get<0>(at::linalg_qr(e.matrix.matmul(o))));
    }
  }
  r.exp_avg_sq = v;
  return out;
}

/// Refreshes U and V (Algorithm 2 of the paper, as the reference code runs it).
void BasisRotation::refresh(Rotated& r, const at::Tensor& g, const at::Tensor& momentum) const {
  const int64_t rows = g.size(0), cols = g.size(1);
  const bool left = uses_left(g), right = uses_right(g);
  const bool warm = (!left || r.q_left.defined()) && (!right || r.q_right.defined());
  const at::TensorOptions as = g.options().dtype(basis_dtype(g));
  const auto or_eye = [&](const at::Tensor& q, int64_t n) { return q.defined() ? q.to(as) : at::eye(n, as); };
  std::vector<Estimate> estimates;
  if (o_.approx_source == Source::Second) {
    if (left) estimates.push_back({r.gg_left.to(as), or_eye(r.q_left, rows), 0});
    if (right) estimates.push_back({r.gg_right.to(as), or_eye(r.q_right, cols), 1});
  } else {
    const at::Tensor target = momentum.to(as);
    if (!warm) {
      estimates.push_back({target, at::Tensor(), 0});
    } else {
      if (left) estimates.push_back({target, or_eye(r.q_right, cols), 0});
      if (right) estimates.push_back({target.t(), or_eye(r.q_left, rows), 1});
    }
  }
  const std::vector<at::Tensor> bases = warm ? warm_bases(r, estimates) : cold_bases(estimates);
  if (o_.approx_source == Source::First && !warm) {
    // One SVD gives both sides; each used side takes its own.
    if (left) r.q_left = bases[0].to(g.scalar_type());
    if (right) r.q_right = bases[1].to(g.scalar_type());
    return;
  }
  size_t at = 0;
  if (left) r.q_left = bases[at++].to(g.scalar_type());
  if (right) r.q_right = bases[at++].to(g.scalar_type());
}

at::Tensor BasisRotation::update(size_t i, at::Tensor& p, const at::Tensor& g) {
  Rotated& r = state_[i];
  const double b1 = o_.betas[0], b2 = o_.betas[1];
  const bool left = uses_left(g), right = uses_right(g);
  if (!r.exp_avg.defined()) {
    r.exp_avg = at::zeros_like(g);
    r.exp_avg_sq = at::zeros_like(g);
    if (o_.approx_source == Source::Second) {
      const at::TensorOptions as = g.options().dtype(basis_dtype(g));
      if (left) r.gg_left = at::zeros({g.size(0), g.size(0)}, as);
      if (right) r.gg_right = at::zeros({g.size(1), g.size(1)}, as);
    }
  }
  const int64_t t = steps_ + 1;
  if (o_.approx_source == Source::Second) {
    const double b_s = o_.shampoo_beta >= 0 ? o_.shampoo_beta : b2;
    if (r.gg_left.defined()) r.gg_left.lerp_(g.matmul(g.t()).to(r.gg_left.scalar_type()), 1 - b_s);
    if (r.gg_right.defined()) r.gg_right.lerp_(g.t().matmul(g).to(r.gg_right.scalar_type()), 1 - b_s);
  }
  const bool unset = o_.left_check_refresh ? !r.q_left.defined()
                                           : (left && !r.q_left.defined()) || (right && !r.q_right.defined());
  if (t % o_.precondition_frequency == 0 || unset) {
    // The momentum one Adam step ahead: what the first-order source estimates from.
    refresh(r, g, r.exp_avg * b1 + g * (1 - b1));
  }
  const at::Tensor g_rotated = project(r, g);
  r.exp_avg.mul_(b1).add_(g, 1 - b1);
  const at::Tensor m_rotated = project(r, r.exp_avg);
  r.exp_avg_sq.mul_(b2).add_(g_rotated.square(), 1 - b2);
  const at::Tensor denom = r.exp_avg_sq.sqrt().add_(o_.eps);
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(t));
  const double step_size = lr_ * std::pow(bc2, 0.5) / bc1;
  const at::Tensor direction = project_back(r, m_rotated / denom);
  if (o_.weight_decay > 0) p.add_(p, -lr_ * o_.weight_decay);
  p.add_(direction, -step_size);
  return g;
}

/// Whether `name` matches one of the shell `patterns`.
bool matches_any(const std::string& name, const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

/// Per parameter, whether it is rotated: a matrix whose name matches a `rotate` pattern
/// (every matrix when the names are not known).
std::vector<bool> rotated_of(const std::vector<at::Tensor>& params, const std::vector<std::string>& names,
                             const std::vector<std::string>& patterns) {
  std::vector<bool> out;
  for (size_t i = 0; i < params.size(); ++i) {
    const bool matched = names.empty() || (i < names.size() && matches_any(names[i], patterns));
    out.push_back(params[i].dim() == 2 && matched);
  }
  return out;
}

/// What one rotated rows x cols matrix keeps and computes a step (docs/schemes.md, "Basis
/// rotation"): its two moments; per side it rotates (n its size) the basis and, when the bases
/// come from the gradients' covariances, the covariance. Each step rotates the gradient and the
/// first moment in and the direction out (2 rows cols n FLOPs a side, each) and adds the
/// side's covariance (as many again); every precondition_frequency steps (every step where
/// left_check_refresh makes it) a refresh multiplies the statistic by the basis, estimates the
/// eigenvalues that order it (as many again) and orthonormalises the product (a QR, about
/// 8/3 n^3). The first step's eigendecomposition, once a run, is left out. Beyond Adam's
/// element-wise kernels a step launches, per side, a product and an average for the covariance
/// and three rotations; a refresh the look-ahead momentum (3) and per side about 8 (the
/// products, the eigenvalue estimates, their order, the permutations, the QR).
StepCost rotation_cost(double rows, double cols, const BasisRotationOptions& o) {
  const bool both = o.rotation_geometry == Geometry::Bilateral;
  const bool covariances = o.approx_source == Source::Second;
  std::vector<double> sides;
  if (both || rows < cols) sides.push_back(rows);
  if (both || rows >= cols) sides.push_back(cols);
  const bool every_step = o.left_check_refresh && !both && rows >= cols;
  const double period = every_step ? 1.0 : static_cast<double>(o.precondition_frequency);
  StepCost c{2 * rows * cols, 0, 3 / period};
  for (const double n : sides) {
    c.state_elements += n * n * (covariances ? 2 : 1);
    c.flops += 2 * rows * cols * n * (covariances ? 4 : 3);
    const double product = covariances ? 2 * n * n * n : 2 * rows * cols * n;
    c.flops += (2 * product + 8.0 / 3.0 * n * n * n) / period;
    c.kernels += (covariances ? 2 : 0) + 3 + 8 / period;
  }
  return c;
}

/// The authors' driver's optimizer of the parameters it does not rotate: torch's AdamW with
/// the same lr, betas and weight decay (optim/optimizer.py, OptimizerWithWeightStashing).
BasisRotationOptions with_fallback(BasisRotationOptions o) {
  if (o.fallback) return o;
  YAML::Node node(YAML::NodeType::Map);
  node["type"] = "adamw";
  node["lr"] = o.lr;
  node["betas"] = o.betas;
  node["weight_decay"] = o.weight_decay;
  const auto source = std::make_shared<ConfigSource>("basis_rotation's default fallback");
  o.fallback = OptimizerSection{Registry<OptimizerFactory>::get().create(ConfigNode(node, source, "optimizer.fallback"))};
  return o;
}

class BasisRotationFactory : public Configured<OptimizerFactory, BasisRotationOptions> {
 public:
  explicit BasisRotationFactory(BasisRotationOptions options) : Configured(with_fallback(std::move(options))) {}
  std::unique_ptr<Optimizer> make(std::vector<at::Tensor> params) const override { return make_named(std::move(params), {}); }
  std::unique_ptr<Optimizer> make_named(std::vector<at::Tensor> params,
                                        const std::vector<std::string>& names) const override {
    const std::vector<bool> rotated = rotated_of(params, names, options_.rotate);
    return std::make_unique<BasisRotation>(std::move(params), rotated, options_, *this);
  }
  double base_lr() const override { return options_.lr; }
  StepCost step_cost(const std::string& name, const std::vector<int64_t>& shape) const override {
    if (shape.size() != 2 || !matches_any(name, options_.rotate)) return options_.fallback->factory->step_cost(name, shape);
    return rotation_cost(static_cast<double>(shape[0]), static_cast<double>(shape[1]), options_);
  }
};

}  // namespace

PIPELAB_REGISTER(OptimizerFactory, BasisRotationFactory, "basis_rotation",
                 "Adam with its second moment in a rotated eigenbasis of each matrix's gradient statistics (Jung, "
                 "Shin and Lee, ICML 2026), a fallback optimizer for the parameters it does not rotate");

}  // namespace pipelab
