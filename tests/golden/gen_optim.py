#!/usr/bin/env python3
"""Golden trajectories of torch.optim (PyTorch 1.13) for tests/lua/optim_spec.lua.

Run: /usr/bin/python3 tests/golden/gen_optim.py > tests/golden/optim.golden.lua

Each case runs an optimizer for a few steps on a small float64 problem and records, per
step, f before the step and x after it. A case lists the PyTorch options (`pt`, for
optim.SGD & co.) and the same settings in Torch7's config names (`t7`, for optim.sgd & co.).
"""
import math
import torch

torch.set_default_dtype(torch.float64)

A = [1.0, 2.0, 0.5, 3.0, 1.5]
B = [0.3, -0.7, 1.1, 0.2, -0.4]
X0 = [1.0, -1.5, 0.5, 2.0, -0.8]


def quartic(x):
    """f = sum(a x^2 / 2 + x^4 / 4 - b x): smooth, one minimum, non-quadratic."""
    a = torch.tensor(A)
    b = torch.tensor(B)
    return (0.5 * a * x * x + 0.25 * x ** 4 - b * x).sum()


def rosen(x):
    """Rosenbrock in n dims: sum 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2."""
    return (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()


def run(opt_cls, pt, fn, x0, steps):
    x = torch.tensor(x0, requires_grad=True)
    opt = opt_cls([x], **pt)
    fs, xs = [], []
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            f = fn(x)
            f.backward()
            return f
        if opt_cls is torch.optim.LBFGS:
            f = opt.step(closure)
        else:
            f = closure()
            opt.step()
        fs.append(float(f))
        xs.append([float(v) for v in x.detach()])
    return fs, xs


def lua(v):
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, (int, float)):
        return repr(float(v)) if math.isfinite(v) else ('1/0' if v > 0 else '-1/0')
    if isinstance(v, str):
        return "'" + v + "'"
    if isinstance(v, (list, tuple)):
        return '{' + ', '.join(lua(e) for e in v) + '}'
    if isinstance(v, dict):
        return '{' + ', '.join('%s = %s' % (k, lua(e)) for k, e in v.items()) + '}'
    raise TypeError(v)


O = torch.optim
CASES = [
    # name, algorithm, class, PyTorch options, Torch7 config, problem, steps
    ('sgd', 'sgd', O.SGD, dict(lr=0.05), dict(learningRate=0.05)),
    ('sgd_momentum', 'sgd', O.SGD, dict(lr=0.05, momentum=0.9),
     dict(learningRate=0.05, momentum=0.9, dampening=0)),
    ('sgd_dampening', 'sgd', O.SGD, dict(lr=0.05, momentum=0.9, dampening=0.5),
     dict(learningRate=0.05, momentum=0.9, dampening=0.5)),
    ('sgd_nesterov', 'sgd', O.SGD, dict(lr=0.05, momentum=0.9, nesterov=True),
     dict(learningRate=0.05, momentum=0.9, dampening=0, nesterov=True)),
    ('sgd_wd', 'sgd', O.SGD, dict(lr=0.05, momentum=0.5, weight_decay=0.1),
     dict(learningRate=0.05, momentum=0.5, dampening=0, weightDecay=0.1)),
    ('adam', 'adam', O.Adam, dict(lr=0.1), dict(learningRate=0.1)),
    ('adam_betas', 'adam', O.Adam, dict(lr=0.1, betas=(0.8, 0.99), eps=1e-6),
     dict(learningRate=0.1, beta1=0.8, beta2=0.99, epsilon=1e-6)),
    ('adam_amsgrad', 'adam', O.Adam, dict(lr=0.1, amsgrad=True),
     dict(learningRate=0.1, amsgrad=True)),
    ('adam_wd', 'adam', O.Adam, dict(lr=0.1, weight_decay=0.1),
     dict(learningRate=0.1, weightDecay=0.1)),
    ('adamw', 'adamw', O.AdamW, dict(lr=0.1), dict(learningRate=0.1)),
    ('adamw_amsgrad', 'adamw', O.AdamW, dict(lr=0.1, weight_decay=0.3, amsgrad=True),
     dict(learningRate=0.1, weightDecay=0.3, amsgrad=True)),
    ('adagrad', 'adagrad', O.Adagrad, dict(lr=0.5), dict(learningRate=0.5)),
    ('adagrad_all', 'adagrad', O.Adagrad,
     dict(lr=0.5, lr_decay=0.1, weight_decay=0.05, initial_accumulator_value=0.1),
     dict(learningRate=0.5, learningRateDecay=0.1, weightDecay=0.05,
          initialAccumulatorValue=0.1)),
    ('adadelta', 'adadelta', O.Adadelta, dict(lr=1.0), dict(learningRate=1.0)),
    ('adadelta_all', 'adadelta', O.Adadelta, dict(lr=2.0, rho=0.8, weight_decay=0.1),
     dict(learningRate=2.0, rho=0.8, weightDecay=0.1)),
    ('adamax', 'adamax', O.Adamax, dict(lr=0.1), dict(learningRate=0.1, epsilon=1e-8)),
    ('adamax_wd', 'adamax', O.Adamax, dict(lr=0.1, weight_decay=0.1, betas=(0.8, 0.9)),
     dict(learningRate=0.1, weightDecay=0.1, beta1=0.8, beta2=0.9, epsilon=1e-8)),
    ('rmsprop', 'rmsprop', O.RMSprop, dict(lr=0.01), dict(learningRate=0.01)),
    ('rmsprop_centered', 'rmsprop', O.RMSprop, dict(lr=0.01, centered=True),
     dict(learningRate=0.01, centered=True)),
    ('rmsprop_momentum', 'rmsprop', O.RMSprop, dict(lr=0.01, momentum=0.9),
     dict(learningRate=0.01, momentum=0.9)),
    ('rmsprop_all', 'rmsprop', O.RMSprop,
     dict(lr=0.01, alpha=0.9, centered=True, momentum=0.5, weight_decay=0.1),
     dict(learningRate=0.01, alpha=0.9, centered=True, momentum=0.5, weightDecay=0.1)),
    ('rprop', 'rprop', O.Rprop, dict(lr=0.1), dict(stepsize=0.1)),
    ('rprop_all', 'rprop', O.Rprop, dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2)),
     dict(stepsize=0.05, etaminus=0.3, etaplus=1.5, stepsizemin=1e-3, stepsizemax=0.2)),
    ('asgd', 'asgd', O.ASGD, dict(lr=0.05, lambd=1e-2, t0=3),
     dict(eta0=0.05, ** {'lambda': 1e-2}, t0=3)),
]

out = ['-- Generated by tests/golden/gen_optim.py (PyTorch %s); do not edit.' % torch.__version__,
       'return {', '  x0 = %s, a = %s, b = %s,' % (lua(X0), lua(A), lua(B)), '  cases = {']
for name, algo, cls, pt, t7 in CASES:
    fs, xs = run(cls, pt, quartic, X0, 8)
    out.append('    {name = %s, algo = %s, class = %s, pt = %s, t7 = %s, f = %s, x = %s},' % (
        lua(name), lua(algo), lua(cls.__name__), lua(pt), lua(t7), lua(fs), lua(xs)))
out.append('  },')

# L-BFGS on Rosenbrock: fixed steps and the strong Wolfe line search, a few calls.
out.append('  lbfgs = {')
LB = [
    ('fixed', [-1.2, 1.0], dict(lr=1, max_iter=5), dict(learningRate=1, maxIter=5), 4),
    ('fixed_small_lr', [-1.2, 1.0, -0.5], dict(lr=0.1, max_iter=7, history_size=3),
     dict(learningRate=0.1, maxIter=7, nCorrection=3), 3),
    ('wolfe', [-1.2, 1.0], dict(lr=1, max_iter=10, line_search_fn='strong_wolfe'),
     dict(learningRate=1, maxIter=10, maxEval=12), 3),
    ('wolfe_4d', [-1.2, 1.0, -0.5, 0.7], dict(lr=1, max_iter=8, history_size=4,
                                              line_search_fn='strong_wolfe'),
     dict(learningRate=1, maxIter=8, nCorrection=4, maxEval=10), 3),
]
for name, x0, pt, t7, steps in LB:
    fs, xs = run(O.LBFGS, pt, rosen, x0, steps)
    out.append('    {name = %s, x0 = %s, pt = %s, t7 = %s, f = %s, x = %s},' % (
        lua(name), lua(x0), lua(pt), lua(t7), lua(fs), lua(xs)))
out.append('  },')

# Learning-rate schedules: lr after each of 12 scheduler steps (base lr 0.1).
out.append('  lr = {')


def sched_run(make, steps=12, metrics=None):
    p = torch.zeros(1, requires_grad=True)
    opt = O.SGD([p], lr=0.1)
    s = make(opt)
    lrs = [opt.param_groups[0]['lr']]
    for i in range(steps):
        opt.step()
        if metrics is not None:
            s.step(metrics[i])
        else:
            s.step()
        lrs.append(opt.param_groups[0]['lr'])
    return lrs


S = O.lr_scheduler
PLATEAU = [1.0, 0.9, 0.95, 0.91, 0.92, 0.93, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6]
SCHED = [
    ('StepLR', '{3, 0.5}', lambda o: S.StepLR(o, 3, 0.5), None),
    ('MultiStepLR', '{{2, 5, 9}, 0.3}', lambda o: S.MultiStepLR(o, [2, 5, 9], 0.3), None),
    ('ExponentialLR', '{0.8}', lambda o: S.ExponentialLR(o, 0.8), None),
    ('CosineAnnealingLR', '{10, 0.01}', lambda o: S.CosineAnnealingLR(o, 10, 0.01), None),
    ('LinearLR', '{0.25, 1.0, 4}', lambda o: S.LinearLR(o, 0.25, 1.0, 4), None),
    ('LambdaLR', '{"0.9^e"}', lambda o: S.LambdaLR(o, lambda e: 0.9 ** e), None),
    ('ReduceLROnPlateau', "{{patience = 1, factor = 0.5, cooldown = 1, min_lr = 0.02}}",
     lambda o: S.ReduceLROnPlateau(o, patience=1, factor=0.5, cooldown=1, min_lr=0.02),
     PLATEAU),
]
for name, args, make, metrics in SCHED:
    out.append('    {name = %s, args = %s, lr = %s%s},' % (
        lua(name), lua(args), lua(sched_run(make, metrics=metrics)),
        (', metrics = ' + lua(metrics)) if metrics else ''))
out.append('  },')
out.append('}')
print('\n'.join(out))
