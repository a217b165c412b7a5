"""common.py -- PyTorch side configuration: Debian's PyTorch oversubscribes threads unless
OpenBLAS is held to one thread and torch to the benchmark's thread count
(shared/BENCHMARKS.md), so every PyTorch script imports this first."""
import os
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
import time  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ.get('BENCH_THREADS', '2')))
now = time.perf_counter
