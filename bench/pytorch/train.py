"""train.py WORKLOAD [torchscript] -- the PyTorch side of bench/tocha/train.lua: the same
training step (forward, loss, backward, optimizer step) on the same sizes. Prints
"ms_per_step peak_rss_mb start_rss_mb" (start: the max RSS just before the model is built).

torchscript: the peer of tocha's compiled step (tocha.jit.step). The model becomes a
TorchScript module (torch.jit.script, or torch.jit.trace where scripting fails) and the
rest of the step stays as in eager mode: PyTorch 1.13 has no way to compile the backward
pass and the optimizer into the graph, and torch.jit.freeze, which folds the parameters
in as constants, applies only to inference modules (a frozen module has no parameters to
train), so it cannot be used here."""
import resource
import sys
from common import torch, now

nn = torch.nn
torch.manual_seed(0)
start_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
workload = sys.argv[1] if len(sys.argv) > 1 else 'tiny_mlp'
mode = sys.argv[2] if len(sys.argv) > 2 else 'eager'
if mode not in ('eager', 'torchscript'):
    raise SystemExit('unknown mode ' + mode)


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
                               nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                               nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                               nn.Linear(84, 10), nn.LogSoftmax(dim=1))

    def forward(self, x):
        return self.f(x)


class LSTMLM(nn.Module):
    def __init__(self, vocab, emb, hidden):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, 2)
        self.proj = nn.Linear(hidden, vocab)
        self.hidden = hidden

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        return self.proj(out.reshape(-1, self.hidden))


if workload == 'tiny_mlp':
    model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
    criterion = nn.MSELoss()
    x, y = torch.randn(8, 10), torch.randn(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = 2000
elif workload == 'mlp':
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    criterion = nn.CrossEntropyLoss()
    x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps = 100
elif workload == 'lenet':
    model = LeNet()
    criterion = nn.NLLLoss()
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    steps = 100
elif workload == 'lstm_lm':
    vocab, emb, hidden, seq, batch = 64, 64, 256, 64, 32
    model = LSTMLM(vocab, emb, hidden)
    criterion = nn.CrossEntropyLoss()
    x = torch.randint(0, vocab, (seq, batch))
    y = torch.randint(0, vocab, (seq * batch,))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    steps = 5
else:
    raise SystemExit('unknown workload ' + workload)



class WithLoss(nn.Module):
    """The model and its loss as one module, so that TorchScript sees the loss too."""

    def __init__(self, model, criterion):
        super().__init__()
        self.model, self.criterion = model, criterion

    def forward(self, x, y):
        return self.criterion(self.model(x), y)


if mode == 'torchscript':
    net = WithLoss(model, criterion)
    try:
        net = torch.jit.script(net)
    except Exception:  # noqa: BLE001 -- scripting rejects some modules; tracing takes them
        net = torch.jit.trace(net, (x, y))
    net.train()

    def loss_of(x, y):
        return net(x, y)
else:
    def loss_of(x, y):
        return criterion(model(x), y)


def step():
    loss = loss_of(x, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


for _ in range(max(3, steps // 10)):
    step()
t0 = now()
for _ in range(steps):
    step()
ms = (now() - t0) * 1e3 / steps
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print('%.4f %.1f %.1f' % (ms, peak, peak - start_rss))
