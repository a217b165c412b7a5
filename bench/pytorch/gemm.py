"""gemm.py [N] -- an N x N float matrix product in PyTorch (GFLOP/s)."""
import sys
from common import torch, now

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
a, b = torch.rand(n, n), torch.rand(n, n)
c = torch.empty(n, n)
torch.mm(a, b, out=c)
best = float('inf')
for _ in range(5):
    t0 = now()
    torch.mm(a, b, out=c)
    best = min(best, now() - t0)
print('%.2f' % (2 * n ** 3 / best / 1e9))
