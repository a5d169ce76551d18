#!/usr/bin/python3
"""PyTorch twin of moelab's backbone-MoE model (README.md, "The model and rho"), for side-by-side
training throughput on random data (tests/bench_torch_backbone.sh).

The model of `moelab bench --model backbone-moe` (= `moelab train --dataset synthetic:64x64x3
--head dense --moe-after 2,3 --moe-hidden 32,64`): dw backbone at 64x64x3, a routed conv-FFN layer
after blocks 2 and 3 (E = 8, k = 2, cf = 1.25, h = 32 and 64), dense head of hidden k*1024,
linear classifier. `--ffn` gives the matched dense baseline (one conv-FFN of hidden k*h).

Routing is moelab's: router on the globally average-pooled map, Gumbel-top-k selection at tau = 1,
gates softmax renormalised over the k selected, capacity C = ceil(cf k B / E) with every first
choice before any second choice and batch order inside a rank, a dropped pair contributes zero;
L_aux = E sum_e f_e P_e (f_e: fraction of samples whose top-k holds e), alpha = 0.01. Experts are
batched as a PyTorch user would: gather the samples routed to an expert, run its two 1x1 convs as
matmuls over (n_e, C, H*W), scale by the gates, index_add back.
Usage: torch_backbone_moe.py [--ffn] [--batch 128] [--steps 20] [--threads 2]
"""
import argparse, math, time
import torch, torch.nn as nn, torch.nn.functional as F


def stages(cin, width=1.0):
    """The dw backbone as 4 stages (stem, block1..3), so layers can follow any of them."""
    c = int(round(32 * width))
    out = [nn.Sequential(nn.Conv2d(cin, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True))]
    chans = [c]
    for _ in range(3):
        out.append(nn.Sequential(
            nn.Conv2d(c, c, 3, stride=2, padding=1, groups=c, bias=False), nn.BatchNorm2d(c), nn.ReLU(inplace=True),
            nn.Conv2d(c, 2 * c, 1, bias=False), nn.BatchNorm2d(2 * c), nn.ReLU(inplace=True)))
        c *= 2
        chans.append(c)
    return out, chans


class MoEConv(nn.Module):
    """y = x + sum over kept (sample, expert) pairs of g * Expert_e(x), Expert_e = 1x1 conv MLP."""

    def __init__(self, c, h, experts, k, cf):
        super().__init__()
        self.router = nn.Linear(c, experts, bias=False)
        self.w1 = nn.Parameter(torch.randn(experts, h, c) * math.sqrt(2 / c))
        self.b1 = nn.Parameter(torch.zeros(experts, h, 1))
        self.w2 = nn.Parameter(torch.randn(experts, c, h) * math.sqrt(1 / h))
        self.b2 = nn.Parameter(torch.zeros(experts, c, 1))
        self.E, self.k, self.cf, self.tau, self.noise = experts, k, cf, 1.0, 1.0

    def forward(self, x):
        B, C, H, W = x.shape
        z = self.router(x.mean((2, 3)))
        probs = F.softmax(z / self.tau, dim=-1)
        g = -torch.log(-torch.log(torch.rand_like(z).clamp_min(1e-20)))
        idx = (z.detach() / self.tau + self.noise * g).topk(self.k, dim=-1).indices
        gate = probs.gather(1, idx)
        gate = gate / gate.sum(-1, keepdim=True)
        cap = math.ceil(self.cf * self.k * B / self.E)
        flat_e = idx.t().reshape(-1)  # k-major: every first choice before any second choice
        flat_b = torch.arange(B).repeat(self.k)
        flat_g = gate.t().reshape(-1)
        xf = x.reshape(B, C, H * W)
        out = torch.zeros_like(xf)
        for e in range(self.E):
            sel = (flat_e == e).nonzero().squeeze(1)[:cap]
            if sel.numel() == 0:
                continue
            b = flat_b[sel]
            hid = F.relu(torch.matmul(self.w1[e], xf[b]) + self.b1[e])  # (n_e, h, HW)
            y = torch.matmul(self.w2[e], hid) + self.b2[e]  # (n_e, C, HW)
            out = out.index_add(0, b, y * flat_g[sel].view(-1, 1, 1))
        f = torch.zeros(self.E).index_add_(0, idx.reshape(-1), torch.ones(idx.numel())) / B
        self.aux = self.E * (f * probs.mean(0)).sum()
        return x + out.view(B, C, H, W)


class FfnConv(nn.Module):
    def __init__(self, c, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, hidden, 1), nn.Conv2d(hidden, c, 1)
        self.aux = torch.zeros(())

    def forward(self, x):
        return x + self.fc2(F.relu(self.fc1(x)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ffn", action="store_true", help="the matched dense baseline layers")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--after", default="2,3")
    p.add_argument("--moe-hidden", default="32,64")
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--cf", type=float, default=1.25)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    body, chans = stages(3)
    after = [int(s) for s in a.after.split(",")]
    hs = [int(s) for s in a.moe_hidden.split(",")]
    layers = {}
    mods = []
    for s, st in enumerate(body):
        mods.append(st)
        if s in after:
            h = hs[after.index(s)] if len(hs) > 1 else hs[0]
            lay = FfnConv(chans[s], a.k * h) if a.ffn else MoEConv(chans[s], h, a.experts, a.k, a.cf)
            layers[s] = lay
            mods.append(lay)
    d = chans[-1]
    head = nn.Sequential(nn.Linear(d, a.k * a.hidden), nn.ReLU(inplace=True), nn.Linear(a.k * a.hidden, d))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.head, self.cls = nn.Sequential(*mods), head, nn.Linear(d, a.classes)

        def forward(self, x):
            f = self.body(x).mean((2, 3))
            return self.cls(f + self.head(f))

    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, 3, a.size, a.size)
    y = torch.randint(0, a.classes, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y) + 0.01 * sum(l.aux for l in layers.values())
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    t = time.perf_counter()
    for _ in range(a.steps):
        step()
    dt = time.perf_counter() - t
    print(f"torch {torch.__version__} threads={a.threads} model=backbone-{'ffn' if a.ffn else 'moe'} "
          f"img/s={a.steps * a.batch / dt:.1f}")


if __name__ == "__main__":
    main()
