"""worker.py key=value ... -- the PyTorch side of the GPU benchmark: the same keys, model,
data sizes, optimizer and channel protocol as bench/gpu/tocha/worker.lua (read its header).

PyTorch's best configuration, as shared/BENCHMARKS.md asks: cudnn.benchmark on; TF32 for
float32 matrix products and convolutions (tocha's side gets the same switch); the
optimizers' default foreach implementation; torch.autocast and torch.amp.GradScaler for
mixed precision. compiled: torch.compile (default mode, or BENCH_TORCH_COMPILE_MODE) of the
forward pass and loss (AOTAutograd compiles their backward); the optimizer step stays eager.
Without torch.compile (PyTorch 1.13, the CPU check) the compiled mode runs eagerly and says
so in its ready line (peer=eager). Works with PyTorch 1.13 and 2.x."""
import os
import resource
import sys
import time
import traceback

ARGS = {}
for a in sys.argv[1:]:
    k, _, v = a.partition('=')
    if not _:
        raise SystemExit('worker.py: expected key=value arguments, got ' + a)
    try:
        ARGS[k] = int(v)
    except ValueError:
        try:
            ARGS[k] = float(v)
        except ValueError:
            ARGS[k] = v
OUT = os.path.join(ARGS['chan'], 'out')
CMD = os.path.join(ARGS['chan'], 'cmd')


def reply(line):
    with open(OUT, 'a') as f:
        f.write(line + '\n')


def reader(path):
    """Complete lines appended to path since the last call (bench/gpu/chan.lua's reader)."""
    state = {'off': 0, 'partial': ''}

    def read():
        try:
            with open(path, 'rb') as f:
                f.seek(state['off'])
                s = f.read().decode()
        except FileNotFoundError:
            return None
        state['off'] += len(s.encode())
        s = state['partial'] + s
        if '\n' not in s:
            state['partial'] = s
            return None
        line, _, rest = s.partition('\n')
        state['partial'] = rest   # further lines come out of it on the next calls
        return line
    return read


def wait(read, timeout):
    t0, pause = time.monotonic(), 0.002
    while True:
        line = read()
        if line is not None:
            return line
        if time.monotonic() - t0 > timeout:
            return None
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def main():
    o = ARGS
    if o['device'] == 'cpu':
        os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
    import torch
    import torch.nn as nn
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models

    cuda = o['device'] == 'cuda'
    if cuda:
        if not torch.cuda.is_available():
            raise RuntimeError('torch.cuda.is_available() is False (PyTorch %s)' % torch.__version__)
        torch.backends.cudnn.benchmark = True
        tf32 = o.get('tf32', 1) == 1
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    else:
        torch.set_num_threads(int(o.get('threads', 2)))
    dev = torch.device('cuda' if cuda else 'cpu')
    torch.manual_seed(o.get('seed', 0))

    m = o['model']
    if m == 'resnet50':
        model = models.resnet(o.get('depth', 50), o['classes'], o.get('width', 64))
        x = torch.randn(o['batch'], 3, o['image'], o['image'])
        y = torch.randint(0, o['classes'], (o['batch'],))
    elif m == 'gpt2':
        model = models.GPT2(o['layers'], o['dim'], o['heads'], o['vocab'], o['context'],
                            dropout=float(o.get('dropout', 0)))
        x = torch.randint(0, o['vocab'], (o['batch'], o['seq']))
        y = torch.randint(0, o['vocab'], (o['batch'] * o['seq'],))
    elif m == 'lstm':
        model = models.LSTMLM(o['vocab'], o.get('emb'), o['hidden'], o['layers'],
                              dropout=float(o.get('dropout', 0)))
        x = torch.randint(0, o['vocab'], (o['seq'], o['batch']))
        y = torch.randint(0, o['vocab'], (o['seq'] * o['batch'],))
    else:
        raise ValueError('unknown model ' + str(m))
    model = model.to(dev).train()
    x, y = x.to(dev), y.to(dev)
    criterion = nn.CrossEntropyLoss()
    n = models.count_parameters(model)

    params = list(model.parameters())
    if o['opt'] == 'sgd':
        optimizer = torch.optim.SGD(params, lr=o['lr'], momentum=o.get('momentum', 0),
                                    weight_decay=o.get('wd', 0))
    elif o['opt'] == 'adam':
        optimizer = torch.optim.Adam(params, lr=o['lr'], weight_decay=o.get('wd', 0))
    elif o['opt'] == 'adamw':
        optimizer = torch.optim.AdamW(params, lr=o['lr'], weight_decay=o.get('wd', 0.01))
    else:
        raise ValueError('unknown optimizer ' + str(o['opt']))

    prec = o['prec']
    if prec not in ('fp32', 'bf16', 'fp16'):
        raise ValueError('unknown precision ' + str(prec))
    if prec == 'fp16' and not cuda:
        raise RuntimeError('fp16 autocast with GradScaler needs CUDA in PyTorch %s' % torch.__version__)
    dtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}.get(prec)
    scaler = None
    if prec == 'fp16':
        scaler = torch.amp.GradScaler('cuda') if hasattr(torch, 'amp') and hasattr(torch.amp, 'GradScaler') \
            else torch.cuda.amp.GradScaler()

    def fwd(x, y):
        if dtype is None:
            return criterion(model(x), y)
        with torch.autocast(device_type=dev.type, dtype=dtype):
            return criterion(model(x), y)

    peer = o['mode']
    if o['mode'] == 'compiled':
        if hasattr(torch, 'compile'):
            mode = os.environ.get('BENCH_TORCH_COMPILE_MODE') or None
            fwd = torch.compile(fwd, mode=mode)
            peer = 'torch.compile' + ('(%s)' % mode if mode else '')
        else:
            peer = 'eager'
    elif o['mode'] != 'eager':
        raise ValueError('unknown mode ' + str(o['mode']))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = fwd(x, y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def peak_mb():
        if cuda:
            return torch.cuda.max_memory_allocated() / 2 ** 20
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    name = torch.cuda.get_device_name() if cuda else 'cpu'
    reply('ready params=%d peer=%s torch=%s device=%s' % (n, peer, torch.__version__, name.replace(' ', '_')))
    read = reader(CMD)
    while True:
        line = wait(read, 3600)
        if line is None or line == 'quit':
            break
        if not line.startswith('steps '):
            raise ValueError('worker.py: unknown command ' + line)
        steps = int(line.split()[1])
        sync()
        t0 = time.monotonic()
        for _ in range(steps):
            loss = step()
        sync()
        secs = time.monotonic() - t0
        reply('done %.6f %.6g %.1f' % (secs, loss.item(), peak_mb()))
    reply('bye')


if __name__ == '__main__':
    try:
        main()
    except BaseException as e:  # noqa: BLE001 -- every failure goes back to the runner
        traceback.print_exc()
        msg = ('%s: %s' % (type(e).__name__, e)).replace('\n', ' | ')
        reply('error ' + msg[:900])
        sys.exit(1)
