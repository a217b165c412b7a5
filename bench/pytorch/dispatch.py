"""dispatch.py MODE -- per-op overhead of a tiny float add in PyTorch eager (microseconds)."""
import sys
from common import torch, now

mode = sys.argv[1] if len(sys.argv) > 1 else 'inplace'
x, y = torch.ones(1), torch.full((1,), 2.0)
n = 1000000


def run():
    z = None
    if mode == 'inplace':
        for _ in range(n):
            x.add_(y)
    else:
        for _ in range(n):
            z = x + y
    return z


with torch.no_grad():
    run()
    t0 = now()
    run()
    print('%.6f' % ((now() - t0) / n * 1e6))
