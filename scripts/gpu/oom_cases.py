"""The jobs of the labelled out-of-memory corpus (tests/data/oom/), each
with its cause known by construction. Runs on the GPU machine, under
`oomlens run` (diagnosis_check.py drives it):

    python3 oom_cases.py NAME [--batch N] [--steps N]

Prints one `RESULT {json}` line: the case, the batch, the steps that
finished, and PyTorch's OutOfMemoryError if one ended the job (caught, so
the process exits normally and oomlens writes its report). Models are built
from configs with random weights; nothing is downloaded."""
import argparse, json, os, sys, time
import torch

CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def gpt2_model(**cfg):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(**cfg)).cuda()


def train_steps(model, opt, batches, loss_of):
    for x in batches:
        loss = loss_of(model, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        yield


def lm_loss(model, x):
    return model(input_ids=x, labels=x).loss


@case
def gpt2_batch(batch, steps):
    """A transformer, fp32 AdamW, sequence 1024: the batch is too large for
    the device's first training step (truth: activations)."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    xs = (torch.randint(0, 50257, (batch, 1024), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lm_loss)


@case
def resnet_batch(batch, steps):
    """A CNN, fp32, SGD with momentum, 224x224 images: too large a batch for
    its first step (truth: activations)."""
    import torchvision
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for _ in range(steps):
        x = torch.randn(batch, 3, 224, 224, device='cuda')
        y = torch.randint(0, 1000, (batch,), device='cuda')
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x, y
        yield


def linear_stack(width, layers, device=None):
    return torch.nn.Sequential(*[torch.nn.Linear(width, width, device=device)
                                 for _ in range(layers)])


@case
def weights_load(batch, steps):
    """The weights alone do not fit: 12 layers of 8192x8192 fp32 (3.2 GB)
    made on the device (truth: persistent)."""
    with torch.device('cuda'):
        m = linear_stack(8192, 12)
    yield


@case
def optimizer_step(batch, steps):
    """Weights and gradients fit, Adam's two moments on top do not: the
    first optimizer step runs out (truth: persistent)."""
    m = linear_stack(8192, 10).cuda()  # 2.7 GB of weights, as many of gradients
    opt = torch.optim.Adam(m.parameters(), lr=1e-4, foreach=False)
    xs = (torch.randn(batch, 8192, device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lambda model, x: model(x).square().mean())


@case
def leak_loss(batch, steps):
    """Each step's loss kept with its graph (`total += loss`): the saved
    activations of every step stay (truth: leak)."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    total = 0
    for _ in range(steps):
        x = torch.randint(0, 50257, (batch, 1024), device='cuda')
        loss = m(input_ids=x, labels=x).loss
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = total + loss  # the bug: the graph of every step is kept
        yield


@case
def leak_eval(batch, steps):
    """Evaluation without torch.no_grad() after each training step, its
    outputs kept in a list with their graphs (truth: leak)."""
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    kept = []
    for _ in range(steps):
        x = torch.randint(0, 50257, (batch, 1024), device='cuda')
        loss = m(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        val = torch.randint(0, 50257, (batch, 1024), device='cuda')
        kept.append(m(input_ids=val).logits[:, -1])  # the bug: a slice keeps the graph
        yield


@case
def kv_cache(batch, steps):
    """Inference: a decoder's key/value cache grows by one token a step,
    by concatenation, until the device is full (truth: leak, the growth of
    a cache by design)."""
    layers, heads, dim = 24, 16, 128
    w = torch.randn(heads * dim, heads * dim, device='cuda') / 64
    ks = [torch.empty(batch, heads, 0, dim, device='cuda') for _ in range(layers)]
    vs = [torch.empty(batch, heads, 0, dim, device='cuda') for _ in range(layers)]
    h = torch.randn(batch, heads * dim, device='cuda')
    with torch.no_grad():
        for _ in range(steps):
            for i in range(layers):
                q = (h @ w).view(batch, heads, 1, dim)
                ks[i] = torch.cat([ks[i], q], dim=2)
                vs[i] = torch.cat([vs[i], q], dim=2)
                att = torch.softmax(q @ ks[i].transpose(-1, -2) / dim ** 0.5, dim=-1)
                h = (att @ vs[i]).reshape(batch, heads * dim)
            yield


@case
def varlen_long(batch, steps):
    """A variable-length fine-tune whose lengths are short but for one long
    sequence (step 6), whose activations do not fit (truth: activations)."""
    m = gpt2_model(n_layer=8, n_positions=8192)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    lengths = [256, 512, 384, 512, 256, 8192, 512, 256][:steps]
    xs = (torch.randint(0, 50257, (batch, n), device='cuda') for n in lengths)
    yield from train_steps(m, opt, xs, lm_loss)


@case
def frag_cache(batch, steps):
    """Short- and long-lived tensors of shifting sizes: PyTorch's cache
    ends with memory reserved but free in pieces (truth: fragmentation
    under PyTorch's cache; oomlens's pool fits it)."""
    import random
    keep = []
    rng = random.Random(2)
    for i in range(steps):
        tmp = [torch.empty(rng.randint(20, 90) << 20, dtype=torch.uint8, device='cuda')
               for _ in range(12)]
        keep += tmp[::4]
        del tmp
        big = torch.empty((150 + 40 * i) << 20, dtype=torch.uint8, device='cuda')
        del big
        yield


@case
def other_process(batch, steps):
    """The job alone fits; another process holds much of the device
    (diagnosis_check.py starts it; truth: external)."""
    yield from gpt2_batch(batch, steps)


@case
def impossible(batch, steps):
    """One request larger than the whole device (truth: impossible)."""
    m = gpt2_model(n_layer=2)
    x = torch.empty(13 << 30, dtype=torch.uint8, device='cuda')
    yield


@case
def fits(batch, steps):
    """A job that fits its cap (truth: no out-of-memory)."""
    yield from gpt2_batch(batch, steps)


@case
def slow_leak(batch, steps):
    """A job near its cap keeps 16 MB a step (the last 40 positions' logits,
    as a metrics hook might): it fails mid-training after some 50 steps,
    never more than 0.3% of the device a step (truth: leak)."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    kept = []
    for _ in range(steps):
        x = torch.randint(0, 50257, (batch, 1024), device='cuda')
        out = m(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        kept.append(out.logits[:, -40:].detach().clone())  # the bug: kept for good
        del out
        yield


@case
def eval_batch(batch, steps):
    """Trains at the batch given, then evaluates under torch.no_grad() at
    16 times that batch, which does not fit (truth: activations, of the
    evaluation; nothing leaks)."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    xs = (torch.randint(0, 50257, (batch, 1024), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lm_loss)
    with torch.no_grad():
        val = torch.randint(0, 50257, (16 * batch, 1024), device='cuda')
        m(input_ids=val, labels=val)
    yield


@case
def bert_batch(batch, steps):
    """An encoder of another family (BERT-base, masked LM, fp32 AdamW,
    sequence 512): the batch is too large for its first step (truth:
    activations)."""
    from transformers import BertConfig, BertForMaskedLM
    m = BertForMaskedLM(BertConfig()).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    xs = (torch.randint(0, 30522, (batch, 512), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lm_loss)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('name', choices=sorted(CASES))
    ap.add_argument('--batch', type=int, default=1)
    ap.add_argument('--steps', type=int, default=2)
    a = ap.parse_args()
    times, oom = [], None
    t0 = time.perf_counter()
    try:
        for _ in CASES[a.name](a.batch, a.steps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            times.append(round(t - t0, 4))
            t0 = t
    except torch.OutOfMemoryError as e:
        oom = str(e).split('\n')[0][:300]
    print('RESULT', json.dumps(dict(case=a.name, batch=a.batch, steps_done=len(times),
                                    step_s=times, oom=oom)), flush=True)


if __name__ == '__main__':
    main()
