"""gen_golden_optim.py -- the optimizer step cases of ops.golden (adam_step, sgd_step,
rmsprop_step, adagrad_step, adamax_step, adadelta_step), imported by gen_golden.py, which
writes them last.

PyTorch's own Adam / AdamW / SGD / RMSprop / Adagrad / Adamax / Adadelta take one step in float64 from the given
state (step t - 1 done); the op gets the per-step scalars lua/optim computes. The cases draw
from their own generator, so adding one at the end leaves the ones before it unchanged.
"""
import math

import torch

opt_gen = torch.Generator().manual_seed(8642)
case = None  # gen_golden.case, set by optimizer_cases


def opt_rnd(*shape, dtype=torch.float64, lo=-2.0, hi=2.0):
    return (torch.rand(tuple(shape), dtype=torch.float64, generator=opt_gen) * (hi - lo) + lo).to(dtype)


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def param(x, g):
    p = torch.nn.Parameter(x.double().clone())
    p.grad = g.double().clone()
    return p


def adam_cases(shape, dt, t, lr, betas, eps, wd, decoupled, amsgrad):
    n = numel(shape)
    x, g = opt_rnd(*shape, dtype=dt), opt_rnd(*shape, dtype=dt)
    rows = [opt_rnd(n, dtype=dt, lo=-0.5, hi=0.5), opt_rnd(n, dtype=dt, lo=0, hi=0.5)]
    if amsgrad:
        rows.append(opt_rnd(n, dtype=dt, lo=0, hi=0.5))
    state = torch.stack(rows)
    p = param(x, g)
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    opt = cls([p], lr=lr, betas=betas, eps=eps, weight_decay=wd, amsgrad=amsgrad)
    st = opt.state[p]
    st['step'] = torch.tensor(float(t - 1))
    st['exp_avg'] = rows[0].double().reshape(shape).clone()
    st['exp_avg_sq'] = rows[1].double().reshape(shape).clone()
    if amsgrad:
        st['max_exp_avg_sq'] = rows[2].double().reshape(shape).clone()
    opt.step()
    keys = ['exp_avg', 'exp_avg_sq'] + (['max_exp_avg_sq'] if amsgrad else [])
    so = torch.stack([st[k].reshape(n) for k in keys]).detach().to(dt)
    bc1, sbc2 = 1 - betas[0] ** t, math.sqrt(1 - betas[1] ** t)
    scal = torch.tensor([-lr * sbc2 / bc1, eps * sbc2, 1 - lr * wd if decoupled else 1.0,
                         0.0 if decoupled else wd], dtype=torch.float64)
    case('adam_step', [x, g, state, scal], [p.detach().to(dt), so], s=betas, i=(int(amsgrad), 0, 0, 0))


def sgd_cases(shape, dt, lr, mom, damp, wd, nesterov):
    x, g, buf = opt_rnd(*shape, dtype=dt), opt_rnd(*shape, dtype=dt), opt_rnd(*shape, dtype=dt, lo=-1, hi=1)
    p = param(x, g)
    opt = torch.optim.SGD([p], lr=lr, momentum=mom, dampening=damp, weight_decay=wd, nesterov=nesterov)
    opt.state[p]['momentum_buffer'] = buf.double().clone()
    opt.step()
    bo = opt.state[p]['momentum_buffer'].detach().to(dt)
    scal = torch.tensor([-lr, wd], dtype=torch.float64)
    case('sgd_step', [x, g, buf, scal], [p.detach().to(dt), bo], s=(mom, damp), i=(int(nesterov), 0, 0, 0))


def rmsprop_cases(shape, dt, lr, alpha, eps, wd, mom, centered):
    """state rows: square_avg, then grad_avg (centered), then momentum_buffer (mom > 0)"""
    n = numel(shape)
    x, g = opt_rnd(*shape, dtype=dt), opt_rnd(*shape, dtype=dt)
    keys = ['square_avg'] + (['grad_avg'] if centered else []) + (['momentum_buffer'] if mom > 0 else [])
    # grad_avg^2 stays below square_avg, as it does in a real run (else sqrt of a negative)
    lims = {'square_avg': (0.3, 0.6), 'grad_avg': (-0.5, 0.5), 'momentum_buffer': (-1, 1)}
    rows = [opt_rnd(n, dtype=dt, lo=lims[k][0], hi=lims[k][1]) for k in keys]
    p = param(x, g)
    opt = torch.optim.RMSprop([p], lr=lr, alpha=alpha, eps=eps, weight_decay=wd, momentum=mom, centered=centered)
    st = opt.state[p]
    st['step'] = 3
    for k, r in zip(keys, rows):
        st[k] = r.double().reshape(shape).clone()
    opt.step()
    so = torch.stack([st[k].reshape(n) for k in keys]).detach().to(dt)
    scal = torch.tensor([-lr, eps, wd], dtype=torch.float64)
    case('rmsprop_step', [x, g, torch.stack(rows), scal], [p.detach().to(dt), so], s=(alpha, mom),
         i=(int(centered), 0, 0, 0))


def adagrad_cases(shape, dt, lr, lr_decay, t, eps, wd):
    x, g, acc = opt_rnd(*shape, dtype=dt), opt_rnd(*shape, dtype=dt), opt_rnd(*shape, dtype=dt, lo=0, hi=2)
    p = param(x, g)
    opt = torch.optim.Adagrad([p], lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=wd)
    st = opt.state[p]
    st['step'] = torch.tensor(float(t - 1))
    st['sum'] = acc.double().clone()
    opt.step()
    so = st['sum'].detach().to(dt)
    scal = torch.tensor([-lr / (1 + (t - 1) * lr_decay), eps, wd], dtype=torch.float64)
    case('adagrad_step', [x, g, acc, scal], [p.detach().to(dt), so])


def two_row_cases(op, cls, keys, lims, shape, dt, t, kw, scal, s):
    """one step of cls from state rows keys (drawn in lims), step t - 1 done"""
    n = numel(shape)
    x, g = opt_rnd(*shape, dtype=dt), opt_rnd(*shape, dtype=dt)
    rows = [opt_rnd(n, dtype=dt, lo=lo, hi=hi) for lo, hi in lims]
    p = param(x, g)
    opt = cls([p], **kw)
    st = opt.state[p]
    st['step'] = torch.tensor(float(t - 1))
    for k, r in zip(keys, rows):
        st[k] = r.double().reshape(shape).clone()
    opt.step()
    so = torch.stack([st[k].reshape(n) for k in keys]).detach().to(dt)
    case(op, [x, g, torch.stack(rows), torch.tensor(scal, dtype=torch.float64)], [p.detach().to(dt), so], s=s)


def adamax_cases(shape, dt, t, lr, betas, eps, wd):
    two_row_cases('adamax_step', torch.optim.Adamax, ['exp_avg', 'exp_inf'], [(-0.5, 0.5), (0, 1)], shape, dt, t,
                  dict(lr=lr, betas=betas, eps=eps, weight_decay=wd), [-lr / (1 - betas[0] ** t), eps, wd], betas)


def adadelta_cases(shape, dt, lr, rho, eps, wd):
    two_row_cases('adadelta_step', torch.optim.Adadelta, ['square_avg', 'acc_delta'], [(0, 0.5), (0, 0.5)], shape,
                  dt, 4, dict(lr=lr, rho=rho, eps=eps, weight_decay=wd), [-lr, eps, wd], (rho, 0))


def optimizer_cases(case_fn):
    global case
    case = case_fn
    for dt in (torch.float32, torch.float64):
        adam_cases((3, 5), dt, 1, 0.1, (0.9, 0.999), 1e-8, 0, False, False)
        adam_cases((4, 6), dt, 7, 0.05, (0.8, 0.99), 1e-6, 0.1, False, False)      # Adam's decay
        adam_cases((2, 3, 4), dt, 3, 0.1, (0.9, 0.999), 1e-8, 0.01, True, False)   # AdamW
        adam_cases((10,), dt, 5, 0.1, (0.9, 0.999), 1e-8, 0.01, True, True)       # amsgrad
        adam_cases((), dt, 2, 0.1, (0.9, 0.95), 1e-8, 0, False, True)             # 0-dim
        sgd_cases((3, 5), dt, 0.1, 0.9, 0, 0, False)
        sgd_cases((2, 7), dt, 0.05, 0.9, 0, 1e-2, True)                            # Nesterov, decay
        sgd_cases((12,), dt, 0.1, 0.5, 0.3, 1e-3, False)                           # dampening
    adam_cases((2, 8), torch.float16, 4, 0.01, (0.9, 0.999), 1e-8, 0.01, True, False)
    adam_cases((2, 8), torch.bfloat16, 4, 0.01, (0.9, 0.999), 1e-8, 0, False, True)
    sgd_cases((9,), torch.float16, 0.1, 0.9, 0, 1e-4, False)
    sgd_cases((9,), torch.bfloat16, 0.1, 0.9, 0, 0, True)
    # added later (appended: the cases above keep their values)
    for dt in (torch.float32, torch.float64):
        rmsprop_cases((3, 5), dt, 0.01, 0.99, 1e-8, 0, 0, False)
        rmsprop_cases((2, 3, 4), dt, 0.02, 0.9, 1e-6, 0.1, 0, True)               # decay, centered
        rmsprop_cases((11,), dt, 0.01, 0.99, 1e-8, 0, 0.9, False)                 # momentum
        rmsprop_cases((4, 3), dt, 0.05, 0.8, 1e-8, 1e-2, 0.5, True)               # all three rows
        rmsprop_cases((), dt, 0.01, 0.99, 1e-8, 0, 0.9, True)                     # 0-dim
        adagrad_cases((3, 5), dt, 0.1, 0, 1, 1e-10, 0)
        adagrad_cases((2, 7), dt, 0.05, 0.01, 5, 1e-6, 0.1)                        # decays
    rmsprop_cases((2, 8), torch.float16, 0.01, 0.99, 1e-8, 1e-2, 0.9, True)
    rmsprop_cases((2, 8), torch.bfloat16, 0.01, 0.99, 1e-8, 0, 0, False)
    adagrad_cases((9,), torch.float16, 0.1, 0, 3, 1e-10, 1e-4)
    adagrad_cases((9,), torch.bfloat16, 0.1, 0.01, 2, 1e-10, 0)
    # added later still
    for dt in (torch.float32, torch.float64):
        adamax_cases((3, 5), dt, 1, 2e-3, (0.9, 0.999), 1e-8, 0)
        adamax_cases((2, 3, 4), dt, 6, 0.05, (0.8, 0.99), 1e-6, 0.1)               # decay
        adamax_cases((), dt, 3, 0.01, (0.9, 0.999), 1e-8, 0)                       # 0-dim
        adadelta_cases((3, 5), dt, 1.0, 0.9, 1e-6, 0)
        adadelta_cases((2, 7), dt, 0.5, 0.95, 1e-4, 1e-2)                          # decay
        adadelta_cases((), dt, 1.0, 0.9, 1e-6, 0)                                  # 0-dim
    adamax_cases((2, 8), torch.float16, 4, 0.01, (0.9, 0.999), 1e-4, 1e-2)
    adamax_cases((2, 8), torch.bfloat16, 2, 0.01, (0.9, 0.999), 1e-8, 0)
    adadelta_cases((9,), torch.float16, 1.0, 0.9, 1e-4, 1e-4)
    adadelta_cases((9,), torch.bfloat16, 1.0, 0.9, 1e-6, 0)
