"""ewchain.py -- the same 8-op elementwise chain on 16M floats in PyTorch eager (GB/s);
`ewchain.py torchscript`: the chain through torch.jit.script."""
import sys

from common import torch, now

n = 16 * 1024 * 1024
x = torch.empty(n).uniform_(0.1, 1)


def chain_of(x):
    z = x * 1.5
    z = z + 0.5
    z = z.abs()
    z = z.sqrt()
    z = torch.mul(z, x)
    z = z - 1
    z = z.tanh()
    z = z.exp()
    return z


def chain():
    return chain_of(x)


if len(sys.argv) > 1 and sys.argv[1] == 'torchscript':
    scripted = torch.jit.script(chain_of)

    def chain():
        return scripted(x)


nbytes = (7 * 2 + 3) * n * 4
with torch.no_grad():
    chain()
    best = float('inf')
    for _ in range(5):
        t0 = now()
        chain()
        best = min(best, now() - t0)
print('%.3f' % (nbytes / best / 1e9))
