#!/usr/bin/python3
"""Reference LAMB and LARS for tests/torch/optimizer_test.cpp.

Straightforward float64 transcriptions of the update rules in lib/dedloc/train/optimizer.hpp, written
without looking at the C++ (LAMB: You et al. 2019, Algorithm 2; LARS: apex's LARC over SGD, as SwAV uses
it). Two cross-checks against torch.optim keep the transcriptions honest:
  * a parameter whose LAMB trust ratio is 1 (no weight decay, lamb_exclude_no_decay) must follow
    torch.optim.Adam exactly;
  * LARS must match apex's LARC recipe (scale .grad, then torch.optim.SGD) on the cases where both norms
    are nonzero, with LARC's eps set to 0.

Run it with Debian's python3-torch:
    /usr/bin/python3 tests/torch/reference/optimizers.py > /tmp/expected.inc
It prints the fixture (inputs and expected values) as C++ that optimizer_test.cpp holds verbatim, so the
test suite itself needs no Python.
"""
import math
import random

import torch

torch.set_default_dtype(torch.float64)

STEPS = 3
LRS = [0.1, 0.05, 0.02]


def make_params():
    """Five small parameters, each exercising a branch. Values are printed with 17 significant digits, so
    the C++ literals parse to the very same doubles."""
    rng = random.Random(20211206)

    def values(n, scale):
        return [round(rng.uniform(-1, 1), 3) * scale for _ in range(n)]

    params = [
        # name, shape, initial values, gradient scale
        ("encoder.weight", [2, 3], values(6, 1.0), 1.0),
        ("encoder.bias", [3], values(3, 0.5), 1.0),          # no weight decay (decays() rejects "bias")
        ("head.weight", [2, 2], values(4, 60.0), 1.0),       # ‖w‖ ≫ ‖u‖: LAMB's trust ratio is clamped
        ("zero.weight", [2], [0.0, 0.0], 1.0),               # ‖w‖ = 0 on the first step: ratio 1
        ("quiet.weight", [3], values(3, 1.0), 1e-4),         # tiny gradients: LARC's clip holds local lr at 1
    ]
    out = []
    for name, shape, init, grad_scale in params:
        n = len(init)
        grads = [values(n, grad_scale) for _ in range(STEPS)]
        out.append(dict(name=name, shape=shape, init=init, grads=grads, decays=not name.endswith("bias")))
    return out


def norm(t):
    return float(torch.linalg.vector_norm(t))


def lamb(params, weight_decay, beta1=0.9, beta2=0.999, epsilon=1e-6, bias_correction=True,
         max_trust_ratio=10.0, exclude_no_decay=False):
    w = {p["name"]: torch.tensor(p["init"]) for p in params}
    m = {k: torch.zeros_like(v) for k, v in w.items()}
    v = {k: torch.zeros_like(x) for k, x in w.items()}
    for t in range(1, STEPS + 1):
        lr = LRS[t - 1]
        for p in params:
            k = p["name"]
            g = torch.tensor(p["grads"][t - 1])
            m[k] = beta1 * m[k] + (1 - beta1) * g
            v[k] = beta2 * v[k] + (1 - beta2) * g * g
            m_hat = m[k] / (1 - beta1 ** t) if bias_correction else m[k]
            v_hat = v[k] / (1 - beta2 ** t) if bias_correction else v[k]
            u = m_hat / (torch.sqrt(v_hat) + epsilon)
            if p["decays"]:
                u = u + weight_decay * w[k]
            w_norm, u_norm = norm(w[k]), norm(u)
            ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
            if max_trust_ratio > 0:
                ratio = min(ratio, max_trust_ratio)
            if exclude_no_decay and not p["decays"]:
                ratio = 1.0
            w[k] = w[k] - lr * ratio * u
    state = {}
    for p in params:
        state["exp_avg/" + p["name"]] = m[p["name"]]
        state["exp_avg_sq/" + p["name"]] = v[p["name"]]
    return w, state


def lars(params, weight_decay, momentum, trust_coefficient, clip, exclude_no_decay):
    w = {p["name"]: torch.tensor(p["init"]) for p in params}
    buf = {k: torch.zeros_like(x) for k, x in w.items()}
    for t in range(STEPS):
        lr = LRS[t]
        for p in params:
            k = p["name"]
            g = torch.tensor(p["grads"][t])
            wd = weight_decay if p["decays"] else 0.0
            d = g + wd * w[k]
            if p["decays"] or not exclude_no_decay:
                w_norm, g_norm = norm(w[k]), norm(g)
                denominator = g_norm + wd * w_norm
                local = trust_coefficient * w_norm / denominator if w_norm > 0 and denominator > 0 else 1.0
                if clip:
                    local = min(local / lr, 1.0) if lr > 0 else 1.0
                d = local * d
            if momentum > 0:
                buf[k] = momentum * buf[k] + d
                d = buf[k]
            w[k] = w[k] - lr * d
    state = {"momentum_buffer/" + p["name"]: buf[p["name"]] for p in params} if momentum > 0 else {}
    return w, state


def check_adam(params, lamb_weights):
    """With ratio 1 and no decay, LAMB is Adam: the bias of the exclude_no_decay case follows torch.optim.Adam."""
    p = next(p for p in params if not p["decays"])
    x = torch.tensor(p["init"], requires_grad=True)
    adam = torch.optim.Adam([x], lr=LRS[0], betas=(0.9, 0.999), eps=1e-6)
    for t in range(STEPS):
        adam.param_groups[0]["lr"] = LRS[t]
        x.grad = torch.tensor(p["grads"][t])
        adam.step()
    assert torch.allclose(x.detach(), lamb_weights[p["name"]], rtol=0, atol=1e-14), "LAMB does not reduce to Adam"


def check_larc(params, weights, weight_decay, momentum, trust_coefficient, clip):
    """apex's LARC (apex/parallel/LARC.py) over torch.optim.SGD, eps = 0, adapting every parameter."""
    xs = [torch.tensor(p["init"], requires_grad=True) for p in params]
    groups = [dict(params=[x], weight_decay=weight_decay if p["decays"] else 0.0) for x, p in zip(xs, params)]
    sgd = torch.optim.SGD(groups, lr=LRS[0], momentum=momentum)
    for t in range(STEPS):
        for x, p in zip(xs, params):
            x.grad = torch.tensor(p["grads"][t])
        with torch.no_grad():
            for group in sgd.param_groups:
                group["lr"] = LRS[t]
                wd = group["weight_decay"]
                x = group["params"][0]
                param_norm, grad_norm = torch.norm(x.data), torch.norm(x.grad.data)
                assert param_norm != 0 and grad_norm != 0, "this check covers nonzero norms only"
                adaptive_lr = trust_coefficient * param_norm / (grad_norm + param_norm * wd)
                if clip:
                    adaptive_lr = min(adaptive_lr / group["lr"], 1)
                x.grad.data += wd * x.data
                x.grad.data *= adaptive_lr
            saved = [g["weight_decay"] for g in sgd.param_groups]
            for g in sgd.param_groups:
                g["weight_decay"] = 0
            sgd.step()
            for g, wd in zip(sgd.param_groups, saved):
                g["weight_decay"] = wd
    for x, p in zip(xs, params):
        assert torch.allclose(x.detach(), weights[p["name"]], rtol=0, atol=1e-14), "LARS differs from LARC: " + p["name"]


def literal(values):
    return "{" + ", ".join("%.17g" % float(x) for x in values) + "}"


def main():
    params = make_params()
    cases = []

    w, s = lamb(params, weight_decay=0.01)
    cases.append(("lamb", "{kind: lamb, weight_decay: 0.01}", w, s))
    w, s = lamb(params, weight_decay=0.01, max_trust_ratio=0)
    cases.append(("lamb_unclamped", "{kind: lamb, weight_decay: 0.01, max_trust_ratio: 0}", w, s))
    w, s = lamb(params, weight_decay=0.1, beta1=0.8, beta2=0.99, epsilon=1e-3, bias_correction=False,
                max_trust_ratio=5, exclude_no_decay=True)
    cases.append(("lamb_variant", "{kind: lamb, weight_decay: 0.1, beta1: 0.8, beta2: 0.99, epsilon: 0.001, "
                  "bias_correction: false, max_trust_ratio: 5, lamb_exclude_no_decay: true}", w, s))
    w, _ = lamb(params, weight_decay=0.0, exclude_no_decay=True)
    check_adam(params, w)

    w, s = lars(params, weight_decay=0.01, momentum=0.9, trust_coefficient=0.001, clip=True, exclude_no_decay=True)
    cases.append(("lars", "{kind: lars, momentum: 0.9, weight_decay: 0.01}", w, s))
    w, s = lars(params, weight_decay=0.001, momentum=0.0, trust_coefficient=0.02, clip=False, exclude_no_decay=False)
    cases.append(("lars_unclipped", "{kind: lars, weight_decay: 0.001, trust_coefficient: 0.02, lars_clip: false, "
                  "lars_exclude_no_decay: false}", w, s))
    nonzero = [p for p in params if p["name"] != "zero.weight"]
    for clip in (True, False):
        w, _ = lars(nonzero, weight_decay=0.01, momentum=0.9, trust_coefficient=0.001, clip=clip,
                    exclude_no_decay=False)
        check_larc(nonzero, w, weight_decay=0.01, momentum=0.9, trust_coefficient=0.001, clip=clip)

    print("// Generated by tests/torch/reference/optimizers.py (/usr/bin/python3, python3-torch %s); do not edit."
          % torch.__version__)
    print("const std::vector<double> kLearningRates = %s;" % literal(LRS))
    print("const std::vector<ReferenceParameter> kParameters = {")
    for p in params:
        grads = ", ".join(literal(g) for g in p["grads"])
        print('    {"%s", %s, %s, {%s}},' % (p["name"], literal(p["shape"]), literal(p["init"]), grads))
    print("};")
    print("const std::vector<ReferenceCase> kCases = {")
    for key, recipe, weights, state in cases:
        print('    {"%s", "%s",' % (key, recipe))
        print("     {")
        for p in params:
            print('         {"%s", %s},' % (p["name"], literal(weights[p["name"]])))
        print("     },")
        print("     {")
        for name, tensor in state.items():
            print('         {"%s", %s},' % (name, literal(tensor)))
        print("     }},")
    print("};")


if __name__ == "__main__":
    main()
