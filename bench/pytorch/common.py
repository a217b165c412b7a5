"""common.py -- PyTorch side configuration: Debian's PyTorch oversubscribes threads unless
OpenBLAS is held to one thread and torch to the benchmark's thread count
(shared/BENCHMARKS.md), so every PyTorch script imports this first."""
import os
# a workload dominated by one BLAS call (gemm) is best with BLAS threads: BENCH_BLAS_THREADS
os.environ.setdefault('OPENBLAS_NUM_THREADS', os.environ.get('BENCH_BLAS_THREADS', '1'))
import time  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(int(os.environ.get('BENCH_THREADS', '2')))
now = time.perf_counter
