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
    # a second job of one name would take the first's place unseen (session
    # 38's convnext_batch did, until renamed)
    if fn.__name__ in CASES:
        raise SystemExit(f'oom_cases.py: two jobs named {fn.__name__}')
    CASES[fn.__name__] = fn
    return fn


def gpt2_model(**cfg):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(**cfg)).cuda()


def learn(loss, opt):
    """One optimizer step from loss, its gradients set to None after."""
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def scaled_learn(loss, opt, scaler):
    """learn() under fp16 autocast's GradScaler."""
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)


def train_steps(model, opt, batches, loss_of):
    for x in batches:
        loss = loss_of(model, x)
        learn(loss, opt)
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
        learn(loss, opt)
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
    xs = (torch.randint(0, 50257, (batch, 1024), device='cuda') for _ in range(steps))
    yield from steps_keeping_graphs(m, opt, xs, lm_loss)


def steps_keeping_graphs(model, opt, batches, loss_of):
    """Training steps whose losses are summed into a running total while
    backward retains each graph (as told to by an error about a second
    backward): the bug, every step's saved activations stay."""
    total = 0
    for x in batches:
        loss = loss_of(model, x)
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
        learn(loss, opt)
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
        learn(out.loss, opt)
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


def bert_mlm(batch, steps, length):
    """BERT-base as a masked LM in fp32 with AdamW, and `steps` batches of
    `length` token ids."""
    from transformers import BertConfig, BertForMaskedLM
    m = BertForMaskedLM(BertConfig()).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    xs = (torch.randint(0, 30522, (batch, length), device='cuda') for _ in range(steps))
    return m, opt, xs


def convnext_t(optim):
    """torchvision's ConvNeXt-T in fp32 and its optimizer: 'adamw', or
    'sgd' (with momentum)."""
    import torchvision
    m = torchvision.models.convnext_tiny().cuda()
    if optim == 'adamw':
        return m, torch.optim.AdamW(m.parameters(), lr=1e-4)
    return m, torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)


@case
def bert_batch(batch, steps):
    """An encoder of another family (BERT-base, masked LM, fp32 AdamW,
    sequence 512): the batch is too large for its first step (truth:
    activations)."""
    yield from train_steps(*bert_mlm(batch, steps, 512), lm_loss)


# Held-out cases (issue 12): kinds, models and leak styles the corpus
# lacks, never looked at while the rules were built. diagnosis_check.py
# runs them with OOMLENS_DIAG_SET=heldout (its HELD_OUT table); their
# traces go to $OUT/heldout/, never into tests/data/oom/.


def hf_from_config(cfg, dtype):
    """A transformers causal LM made from its config in `dtype`, as a user
    loading in bf16 writes it (the keyword is `dtype` from transformers 5,
    `torch_dtype` before)."""
    from transformers import AutoModelForCausalLM
    try:
        return AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    except TypeError:
        return AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype)


class LstmLm(torch.nn.Module):
    """An LSTM language model (cuDNN): by default two layers of 1024 over
    embeddings of 512, vocabulary 10000."""

    def __init__(self, vocab=10000, embed=512, hidden=1024, layers=2):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, embed)
        self.rnn = torch.nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, x):
        hidden, _ = self.rnn(self.emb(x))
        return hidden, self.head(hidden)


def lstm_step(m, opt, batch, length=256):
    """One training step of LstmLm; returns its hidden states (with their
    graph freed by backward)."""
    x = torch.randint(0, 10000, (batch, length), device='cuda')
    hidden, logits = m(x)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten())
    learn(loss, opt)
    return hidden


def image_batches(batch, steps, size=224, classes=1000):
    for _ in range(steps):
        yield (torch.randn(batch, 3, size, size, device='cuda'),
               torch.randint(0, classes, (batch,), device='cuda'))


def class_loss(model, xy):
    x, y = xy
    return torch.nn.functional.cross_entropy(model(x), y)


@case
def hook_leak(batch, steps):
    """ResNet-18, SGD, 224x224: a forward hook on layer1 appends its output
    to a list (a feature-logging hook) without detach: each step keeps one
    25.7 MB activation at batch 32 for good (truth: leak)."""
    import torchvision
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    features = []
    m.layer1.register_forward_hook(lambda mod, inp, out: features.append(out))
    yield from train_steps(m, opt, image_batches(batch, steps), class_loss)


@case
def dict_leak(batch, steps):
    """An LSTM language model keeps, per step, a detached strided view of its
    hidden states in a dict (`history[step] = hidden[:, ::4].detach()`,
    for later metrics): no graph, but the view holds its whole 33.5 MB base
    at batch 32 (truth: leak)."""
    m = LstmLm().cuda()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    history = {}
    for step in range(steps):
        hidden = lstm_step(m, opt, batch)
        history[step] = hidden[:, ::4].detach()  # the bug: the base stays
        del hidden
        yield


def t5_model():
    """T5-small's shape from its config. transformers 5's T5Config holds no
    token ids by default, and the decoder's inputs (labels shifted right)
    need decoder_start_token_id and pad_token_id: t5-small's own, 0 (and
    eos 1). Without them the first step raised AttributeError after the
    encoder (held-out accum_leak never ran out; t5_batch ran out in the
    encoder, before reaching it)."""
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config()
    for name, value in (('decoder_start_token_id', 0), ('pad_token_id', 0), ('eos_token_id', 1)):
        setattr(cfg, name, value)  # set after: a keyword some versions drop
    return T5ForConditionalGeneration(cfg).cuda()


def t5_loss(m, batch, source=256, target=64):
    x = torch.randint(0, 32128, (batch, source), device='cuda')
    y = torch.randint(0, 32128, (batch, target), device='cuda')
    return m(input_ids=x, labels=y).loss


@case
def accum_leak(batch, steps):
    """T5-small, gradient accumulation whose window grows: the loss of each
    micro-step is summed and backward comes only at the window's end, the
    k-th window being k micro-steps long (a schedule bug). Every micro-step
    keeps its graph until then, so what outlives a micro-step grows until
    one window no longer fits (truth: leak: the fix is backward at each
    micro-step, not a smaller batch). A yield per micro-step."""
    m = t5_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    window, done, total = 1, 0, 0
    for _ in range(steps):
        total = total + t5_loss(m, batch)
        done += 1
        if done == window:
            learn(total, opt)
            window, done, total = window + 1, 0, 0
        yield


@case
def vit_batch(batch, steps):
    """A vision transformer (torchvision ViT-B/16, fp32 AdamW, 224x224): the
    batch is too large for its first step (truth: activations)."""
    import torchvision
    m = torchvision.models.vit_b_16().cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    yield from train_steps(m, opt, image_batches(batch, steps), class_loss)


@case
def seg_batch(batch, steps):
    """Semantic segmentation (torchvision FCN-ResNet50, output stride 8,
    21 classes, 384x384, fp32 SGD): the batch is too large for its first
    step (truth: activations)."""
    import torchvision
    m = torchvision.models.segmentation.fcn_resnet50(
        weights=None, weights_backbone=None, num_classes=21, aux_loss=False).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    for _ in range(steps):
        x = torch.randn(batch, 3, 384, 384, device='cuda')
        y = torch.randint(0, 21, (batch, 384, 384), device='cuda')
        loss = torch.nn.functional.cross_entropy(m(x)['out'], y)
        learn(loss, opt)
        del loss, x, y
        yield


@case
def t5_batch(batch, steps):
    """An encoder-decoder (T5-small from its config, fp32 AdamW, source 256,
    target 64): the batch is too large for its first step (truth:
    activations)."""
    m = t5_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        t5_loss(m, batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        yield


@case
def ckpt_batch(batch, steps):
    """GPT-2 under bf16 autocast with gradient checkpointing, sequence 1024,
    fp32 AdamW: activations are small per layer, the batch too large
    nonetheless (truth: activations)."""
    m = gpt2_model()
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})
    m.config.use_cache = False
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)

    def bf16_loss(model, x):
        with torch.autocast('cuda', dtype=torch.bfloat16):
            return lm_loss(model, x)
    batches = (torch.randint(0, 50257, (batch, 1024), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, batches, bf16_loss)


@case
def weights_bf16(batch, steps):
    """A Llama-shaped model of 1.16 B parameters made from its config in
    bf16 (`from_config(cfg, dtype=torch.bfloat16)`), then `.cuda()`: 2.3 GB
    of weights for a 2G cap (truth: persistent)."""
    from transformers import LlamaConfig
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=20,
                      num_attention_heads=16, num_key_value_heads=16, vocab_size=32000)
    m = hf_from_config(cfg, torch.bfloat16)
    m.cuda()
    yield


@case
def adam_vit(batch, steps):
    """ViT-L/16 (304 M parameters, 1.2 GB fp32) trains its first forward and
    backward under a 4G cap; AdamW's two moments (2.4 GB more, made at the
    first `step()`, foreach) do not fit: weights, gradients and optimizer
    state alone are 4.9 GB (truth: persistent)."""
    import torchvision
    m = torchvision.models.vit_l_16().cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    yield from train_steps(m, opt, image_batches(batch, steps), class_loss)


def greedy_generate(m, x, new_tokens):
    """GPT-2 `generate` of exactly new_tokens tokens, greedy, under no_grad."""
    with torch.no_grad():
        return m.generate(input_ids=x, attention_mask=torch.ones_like(x),
                          max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                          pad_token_id=50256)


@case
def generate_batch(batch, steps):
    """Inference: GPT-2 `generate`, greedy, prompt 128, 384 new tokens forced
    (`min_new_tokens`), under no_grad, once per step. One call's key/value
    cache grows by design with each token and is freed when the call
    returns; at this batch it does not fit within the first call (truth:
    leak, as kv_cache's: what outlives each decode step grows, and the
    advice names the cache, one request's working set, with the batch and
    the new tokens as the lever; the bisected largest batch is 78 to 80)."""
    m = gpt2_model()
    m.eval()
    for _ in range(steps):
        greedy_generate(m, torch.randint(0, 50000, (batch, 128), device='cuda'), 384)
        yield


@case
def plateau_fits(batch, steps):
    """GPT-2 (6 layers), a length curriculum 256, 512, 768, 1024 over the
    first 4 steps, then 1024; the model code memoizes a per-length attention
    bias (batch x 12 heads x L x L fp32, 201 MB at 1024 and batch 4) and
    never frees it. What outlives steps grows for 4 steps (by 13, 50, 113
    and 201 MB), then stays: a bounded cache, not a leak; the job fits
    (truth: none, and no leak warning standing at the end)."""
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    bias = {}

    def curriculum():
        for step in range(steps):
            n = min(256 * (step + 1), 1024)
            if n not in bias:
                bias[n] = torch.zeros(batch, 12, n, n, device='cuda')
            yield torch.randint(0, 50257, (batch, n), device='cuda')
    yield from train_steps(m, opt, curriculum(), lm_loss)


@case
def late_batch(batch, steps):
    """An LSTM language model trains healthily at the batch given for all
    but its last step, which comes at 8 times that batch (a last bucket of a
    sampler, a batch-size schedule): that step's activations do not fit
    (truth: activations, after a long run; nothing leaks)."""
    m = LstmLm().cuda()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    for step in range(steps):
        lstm_step(m, opt, batch if step < steps - 1 else 8 * batch)
        yield


# The second held-out set (written 2026-12-02, session 6, not yet run):
# what the first taught the rules is in them now, so these say again how
# they do on jobs they were not built on. Each truth is by construction.


@case
def frozen_batch(batch, steps):
    """GPT-2 124M fp32, all but its last two blocks and the head frozen
    (a partial fine-tune: few gradients, little optimizer state), AdamW,
    sequence 1024: the batch is too large for its first step (truth:
    activations)."""
    m = gpt2_model()
    for p in m.parameters():
        p.requires_grad_(False)
    for block in m.transformer.h[-2:]:
        for p in block.parameters():
            p.requires_grad_(True)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4)
    batches = (torch.randint(0, 50257, (batch, 1024), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, batches, lm_loss)


@case
def cat_leak(batch, steps):
    """ResNet-18, SGD, 224x224: the job gathers layer2's detached features of
    every step into one tensor by concatenation, for an epoch-end
    embedding plot (`bank = torch.cat([bank, feats.detach()])`): no graph,
    but the bank is copied larger each step, 12.8 MB more at batch 32
    (truth: leak; the growth is by replacement, as a cache's is, but in a
    training job)."""
    import torchvision
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    bank = [torch.empty(0, 128, 28, 28, device='cuda')]
    m.layer2.register_forward_hook(
        lambda mod, inp, out: bank.__setitem__(0, torch.cat([bank[0], out.detach()])))
    yield from train_steps(m, opt, image_batches(batch, steps), class_loss)


class SmallUnet(torch.nn.Module):
    """A U-Net of four levels (64 to 512 channels), 3 to 1 channels: its
    layers differ level by level, so a first step's forward does not
    repeat alike."""

    def __init__(self):
        super().__init__()
        conv = lambda i, o: torch.nn.Sequential(
            torch.nn.Conv2d(i, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU(),
            torch.nn.Conv2d(o, o, 3, padding=1), torch.nn.BatchNorm2d(o), torch.nn.ReLU())
        widths = [64, 128, 256, 512]
        self.down = torch.nn.ModuleList()
        prev = 3
        for w in widths:
            self.down.append(conv(prev, w))
            prev = w
        self.up = torch.nn.ModuleList()
        self.fuse = torch.nn.ModuleList()
        for w in reversed(widths[:-1]):
            self.up.append(torch.nn.ConvTranspose2d(prev, w, 2, stride=2))
            self.fuse.append(conv(2 * w, w))
            prev = w
        self.out = torch.nn.Conv2d(prev, 1, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x)
            if i < len(self.down) - 1:
                skips.append(x)
                x = torch.nn.functional.max_pool2d(x, 2)
        for up, fuse in zip(self.up, self.fuse):
            x = fuse(torch.cat([up(x), skips.pop()], dim=1))
        return self.out(x)


@case
def unet_batch(batch, steps):
    """A U-Net (SmallUnet), fp32 Adam, 256x256 masks: the batch is too large
    for its first step (truth: activations; its levels differ, so the
    figure is an upper bound)."""
    m = SmallUnet().cuda()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)

    def seg_loss(model, x):
        return torch.nn.functional.binary_cross_entropy_with_logits(model(x), (x[:, :1] > 0).float())
    batches = (torch.randn(batch, 3, 256, 256, device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, batches, seg_loss)


@case
def distill_state(batch, steps):
    """Distillation: a frozen GPT-2 teacher of 24 layers, width 1024 (1.4 GB
    fp32, under no_grad) beside a GPT-2 124M student trained with AdamW,
    sequence 256, batch 2, under a 3G cap: the teacher's weights and the
    student's weights, gradients and moments alone do not fit, at its first
    optimizer step (truth: persistent)."""
    teacher = gpt2_model(n_layer=24, n_embd=1024, n_head=16).eval()
    student = gpt2_model()
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)

    def distill_loss(model, x):
        with torch.no_grad():
            target = teacher(input_ids=x).logits.softmax(-1)
        logits = model(input_ids=x).logits
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten(0, 1))
    batches = (torch.randint(0, 50257, (batch, 256), device='cuda') for _ in range(steps))
    yield from train_steps(student, opt, batches, distill_loss)


@case
def serve_leak(batch, steps):
    """Inference serving: GPT-2 `generate` per request, batch 8, prompt 64,
    32 new tokens, under no_grad; the server keeps each request's whole
    output object (`return_dict_in_generate=True, output_scores=True`: its
    scores, 51 MB, and its past_key_values where transformers returns them,
    57 MB) in a list for a later re-ranking pass that never comes (truth:
    leak: across calls, not within one)."""
    m = gpt2_model()
    m.eval()
    kept = []
    for _ in range(steps):
        x = torch.randint(0, 50000, (batch, 64), device='cuda')
        with torch.no_grad():
            out = m.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=32,
                             min_new_tokens=32, do_sample=False, pad_token_id=50256,
                             return_dict_in_generate=True, output_scores=True,
                             use_cache=True)
        kept.append(out)
        yield


class UnrolledGru(torch.nn.Module):
    """A GRU language model unrolled step by step in Python (a GRUCell per
    token), vocabulary 8000, hidden 1024: its allocations grow with the
    sequence length."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(8000, 512)
        self.cell = torch.nn.GRUCell(512, 1024)
        self.head = torch.nn.Linear(1024, 8000)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 1024, device=x.device)
        e = self.emb(x)
        outs = []
        for t in range(x.shape[1]):
            h = self.cell(e[:, t], h)
            outs.append(h)
        return self.head(torch.stack(outs, 1))


@case
def rnn_curriculum_fits(batch, steps):
    """An unrolled GRU LM trained on a length curriculum: 32 tokens more each
    step, from 32 to 32 * steps (12 steps: 384), batch 32, Adam, under 8G:
    each step needs more and makes more allocations by design, and the job
    fits (truth: none, and no leak warning standing: the rule for growing
    work, written for accum_leak, must not take a curriculum for a leak)."""
    m = UnrolledGru().cuda()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    for step in range(steps):
        x = torch.randint(0, 8000, (batch, 32 * (step + 1)), device='cuda')
        logits = m(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten())
        learn(loss, opt)
        del loss, logits
        yield


# The third held-out set (session 12, 2026-12-03), written before any of
# it ran: kinds the corpus lacks (an embedding's dense gradient, a CNN's
# inference, a graph kept by a metrics list, an RL replay buffer, a CNN on
# varying image sizes, bf16 channels-last depthwise convolutions, another
# process arriving mid-training, a checkpoint loaded onto the device).


@case
def embed_grads(batch, steps):
    """A recommendation-style model: a 1,000,000 x 512 fp32 embedding (2.0
    GB) and a small MLP, SGD without momentum, under 4G. The weights fit;
    the embedding's dense gradient, as large again, does not, in the first
    backward (truth: persistent: weights and gradients alone; the fix is a
    sparse embedding, a smaller table or bf16, not a smaller batch)."""
    m = torch.nn.Sequential(torch.nn.EmbeddingBag(1_000_000, 512, mode='mean'),
                            torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 1)).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for _ in range(steps):
        x = torch.randint(0, 1_000_000, (batch, 32), device='cuda')
        loss = m(x).square().mean()
        learn(loss, opt)
        del loss
        yield


@case
def cnn_infer_batch(batch, steps):
    """ResNet-50 inference (eval, no_grad) at a batch too large, 224x224,
    under 8G: nothing is trained, the forward's own memory does not fit
    (truth: activations)."""
    import torchvision
    m = torchvision.models.resnet50().cuda().eval()
    with torch.no_grad():
        for _ in range(steps):
            x = torch.randn(batch, 3, 224, 224, device='cuda')
            m(x).argmax(1)
            del x
            yield


@case
def metric_leak(batch, steps):
    """ResNet-18, SGD, 224x224, batch 8: each step's output is appended to a
    list for an accuracy computed at the epoch's end, without detach, so
    every step's graph (its saved activations) stays (truth: leak)."""
    import torchvision
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    outputs = []
    for x, y in image_batches(batch, steps):
        out = m(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        outputs.append(out)  # the bug: out keeps its graph
        del loss
        yield


@case
def replay_leak(batch, steps):
    """Reinforcement learning: 64 environments' observations (4x84x84 fp32,
    7.2 MB a step) appended to a replay buffer on the device that is never
    bounded; a small conv Q-network trains on 4 sampled entries a step, Adam,
    under 3G (truth: leak)."""
    import random
    q = torch.nn.Sequential(torch.nn.Conv2d(4, 32, 8, 4), torch.nn.ReLU(),
                            torch.nn.Conv2d(32, 64, 4, 2), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(64 * 9 * 9, 512),
                            torch.nn.ReLU(), torch.nn.Linear(512, 6)).cuda()
    opt = torch.optim.Adam(q.parameters(), lr=1e-4)
    buffer = []
    for _ in range(steps):
        buffer.append(torch.rand(64, 4, 84, 84, device='cuda'))  # the bug: unbounded
        obs = torch.cat(random.sample(buffer, min(4, len(buffer))))
        loss = q(obs).max(1).values.square().mean()
        learn(loss, opt)
        del loss, obs
        yield


@case
def varshape_fits(batch, steps):
    """ResNet-50, Adam, batch 16, each step's images of a size drawn from
    160 to 448 (multiples of 32, seeded), under 8G: fits (truth: none, no
    leak warning: sizes that vary are no leak)."""
    import random, torchvision
    rng = random.Random(5)
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    for _ in range(steps):
        size = 32 * rng.randint(5, 14)
        x = torch.randn(batch, 3, size, size, device='cuda')
        y = torch.randint(0, 1000, (batch,), device='cuda')
        loss = torch.nn.functional.cross_entropy(m(x), y)
        learn(loss, opt)
        del loss, x, y
        yield


@case
def effnet_batch(batch, steps):
    """EfficientNet-B0 under bf16 autocast, channels-last, AdamW, 224x224,
    under 6G: too large a batch for its first step (truth: activations)."""
    import torchvision
    m = torchvision.models.efficientnet_b0().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for x, y in image_batches(batch, steps):
        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(
                m(x.to(memory_format=torch.channels_last)), y)
        learn(loss, opt)
        del loss
        yield


HOG_CHILD = """
import sys, time, torch
x = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device='cuda')
torch.cuda.synchronize()
print('holding', flush=True)
time.sleep(900)
"""


@case
def external_late(batch, steps):
    """GPT-2 trains 3 steps at batch 2 under 12G; then another process (a
    child started without oomlens) takes 8 GiB of the device, and the job
    goes on at batch 3, which alone would fit (batch 5 does): out of memory
    (truth: external)."""
    import subprocess
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    xs = (torch.randint(0, 50257, (batch, 1024), device='cuda') for _ in range(3))
    yield from train_steps(m, opt, xs, lm_loss)
    env = {k: v for k, v in os.environ.items()
           if k != 'LD_PRELOAD' and not k.startswith('OOMLENS')}
    hog = subprocess.Popen([sys.executable, '-c', HOG_CHILD, str(8 << 30)],
                           stdout=subprocess.PIPE, text=True, env=env)
    try:
        hog.stdout.readline()
        xs = (torch.randint(0, 50257, (batch + 1, 1024), device='cuda')
              for _ in range(max(1, steps - 3)))
        yield from train_steps(m, opt, xs, lm_loss)
    finally:
        hog.kill()
        hog.wait()


@case
def checkpoint_load(batch, steps):
    """A model of 6 layers of 8192x8192 fp32 (1.6 GB) on the device, then its
    checkpoint loaded with `torch.load(path, map_location='cuda')` before
    `load_state_dict`: a second copy of the weights, under 3G (truth:
    persistent: the weights twice; the fix is map_location='cpu' or
    loading with mmap/assign)."""
    import tempfile
    m = linear_stack(8192, 6).cuda()
    folder = tempfile.mkdtemp(prefix='oomlens-ckpt-')
    path = os.path.join(folder, 'model.pt')
    try:
        torch.save({k: v.cpu() for k, v in m.state_dict().items()}, path)
        state = torch.load(path, map_location='cuda')
        m.load_state_dict(state)
        del state
        yield
    finally:
        if os.path.exists(path):
            os.remove(path)
        os.rmdir(folder)


# The fourth held-out set (session 13, 2026-12-03): committed before any of
# it ran. Model families, loop shapes and ways to run out the rules were
# not built on: two networks and two optimizers in one iteration, 1-D
# convolutions over raw audio, PyTorch's own transformer layers under fp16
# with a GradScaler, a leak that grows only every fourth step, one that
# grows by an irregular amount, a weight average kept as a deep copy, a
# second allocator's cache in the same process, and a job that fits only
# because PyTorch's cache frees and retries.


@case
def gan_batch(batch, steps):
    """A DCGAN at 64x64 (a generator of five transposed convolutions, a
    discriminator of five convolutions, batch norm), two Adam optimizers;
    each iteration a discriminator step on real and generated images and a
    generator step, under 3G: too large a batch for its first iteration
    (truth: activations)."""
    nn = torch.nn
    g = nn.Sequential(
        nn.ConvTranspose2d(128, 512, 4, 1, 0, bias=False), nn.BatchNorm2d(512), nn.ReLU(True),
        nn.ConvTranspose2d(512, 256, 4, 2, 1, bias=False), nn.BatchNorm2d(256), nn.ReLU(True),
        nn.ConvTranspose2d(256, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.ReLU(True),
        nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(True),
        nn.ConvTranspose2d(64, 3, 4, 2, 1, bias=False), nn.Tanh()).cuda()
    d = nn.Sequential(
        nn.Conv2d(3, 64, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
        nn.Conv2d(64, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.LeakyReLU(0.2, True),
        nn.Conv2d(128, 256, 4, 2, 1, bias=False), nn.BatchNorm2d(256), nn.LeakyReLU(0.2, True),
        nn.Conv2d(256, 512, 4, 2, 1, bias=False), nn.BatchNorm2d(512), nn.LeakyReLU(0.2, True),
        nn.Conv2d(512, 1, 4, 1, 0, bias=False), nn.Flatten()).cuda()
    opt_g = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = torch.nn.functional.binary_cross_entropy_with_logits
    for _ in range(steps):
        real = torch.randn(batch, 3, 64, 64, device='cuda')
        fake = g(torch.randn(batch, 128, 1, 1, device='cuda'))
        ones = torch.ones(batch, 1, device='cuda')
        zeros = torch.zeros(batch, 1, device='cuda')
        learn(bce(d(real), ones) + bce(d(fake.detach()), zeros), opt_d)
        learn(bce(d(fake), ones), opt_g)
        del real, fake
        yield


@case
def audio_batch(batch, steps):
    """A wav2vec-style speech model: seven 1-D convolutions over 10 s of
    16 kHz audio (512 channels, the first of stride 5 with a group norm),
    then 4 pre-norm transformer layers of width 512 over the 499 frames, a
    frame classifier's cross entropy, AdamW, under 6G: too large a batch
    for its first step (truth: activations)."""
    nn = torch.nn
    convs = [nn.Conv1d(1, 512, 10, 5, bias=False), nn.GroupNorm(512, 512), nn.GELU()]
    for k in (3, 3, 3, 3, 2, 2):
        convs += [nn.Conv1d(512, 512, k, 2, bias=False), nn.GELU()]

    class Speech(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(*convs)
            layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.head = nn.Linear(512, 32)

        def forward(self, wave):
            frames = self.features(wave.unsqueeze(1)).transpose(1, 2)
            return self.head(self.encoder(frames))

    m = Speech().cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        logits = m(torch.randn(batch, 160000, device='cuda'))
        y = torch.randint(0, 32, logits.shape[:2], device='cuda')
        learn(torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()), opt)
        del logits, y
        yield


def native_lm(width, heads, layers, vocab=32000):
    """A causal language model of PyTorch's own pre-norm encoder layers (feed
    forward 4x the width) on the device."""
    nn = torch.nn

    class Lm(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            layer = nn.TransformerEncoderLayer(width, heads, 4 * width, batch_first=True,
                                               norm_first=True)
            self.body = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(width, vocab)

        def forward(self, x):
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
            return self.head(self.body(self.embed(x), mask=mask, is_causal=True))

    return Lm().cuda()


@case
def native_tf_batch(batch, steps):
    """A language model of PyTorch's own layers (torch.nn.TransformerEncoder:
    12 pre-norm layers of width 1024, 16 heads, a causal mask), vocabulary
    32000, sequence 512, AdamW, fp16 autocast with a GradScaler, under 8G:
    too large a batch for its first step (truth: activations)."""
    m = native_lm(width=1024, heads=16, layers=12)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler('cuda')
    for _ in range(steps):
        x = torch.randint(0, 32000, (batch, 512), device='cuda')
        with torch.autocast('cuda', dtype=torch.float16):
            logits = m(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), x.flatten())
        scaled_learn(loss, opt, scaler)
        del logits, loss, x
        yield


@case
def burst_leak(batch, steps):
    """GPT-2 (6 layers), batch 4, sequence 512, AdamW, under 6G; every 4th
    step one validation sequence (256 tokens) is scored and its loss
    appended to a list without no_grad or .item(), so each validation keeps
    its graph: what outlives steps grows in bursts, once every 4 steps, by
    about 150 MB (truth: leak)."""
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    val_losses = []
    for step in range(steps):
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda')), opt)
        if step % 4 == 3:
            v = torch.randint(0, 50257, (1, 256), device='cuda')
            val_losses.append(lm_loss(m, v))  # the bug: the loss keeps its graph
        yield


@case
def mining_leak(batch, steps):
    """ResNet-18, SGD with momentum, batch 32, 224x224, under 3G: the images
    whose loss is above the batch's mean are kept on the device for a later
    hard-example pass that never comes, a different number each step
    (600 KB an image, about 16 a step): what outlives steps grows by an
    irregular amount (truth: leak)."""
    import torchvision
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    hard = []
    for x, y in image_batches(batch, steps):
        losses = torch.nn.functional.cross_entropy(m(x), y, reduction='none')
        learn(losses.mean(), opt)
        hard.append(x[losses.detach() > losses.detach().mean()])  # the bug: never bounded
        del losses
        yield


@case
def ema_state(batch, steps):
    """Four 8192x8192 fp32 linear layers (1.07 GB) with an exponential moving
    average of the weights kept as a deep copy of the model on the device,
    AdamW, batch 64, under 4G: the weights, their average, the gradients and
    AdamW's two moments (5.4 GB) do not fit; out at the first optimizer
    step (truth: persistent)."""
    import copy
    m = linear_stack(8192, 4).cuda()
    ema = copy.deepcopy(m).requires_grad_(False)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        learn(m(torch.randn(batch, 8192, device='cuda')).square().mean(), opt)
        with torch.no_grad():
            for average, p in zip(ema.parameters(), m.parameters()):
                average.lerp_(p, 0.001)
        yield


@case
def cupy_pool(batch, steps):
    """Features made on the device with CuPy first (two 4 GiB float32 arrays,
    a summary copied to the host, the arrays deleted), then GPT-2 trains at
    batch 2 in the same process under 12G. CuPy's memory pool keeps the
    8 GiB it freed for its own reuse, so the training, which fits alone
    (batch 5 does), runs out (truth: external: memory held in this process
    outside PyTorch; the fix is cupy.get_default_memory_pool().free_all_blocks())."""
    import cupy
    x = cupy.random.standard_normal(1 << 30, dtype=cupy.float32)
    y = cupy.empty_like(x)
    cupy.multiply(x, x, out=y)
    summary = float(y.mean()), cupy.asnumpy(y[:4096])
    del x, y
    print('cupy pool holds', cupy.get_default_memory_pool().total_bytes(), 'bytes;',
          'summary', round(summary[0], 3), file=sys.stderr, flush=True)
    yield from gpt2_batch(batch, steps)  # the training that fits alone


@case
def retry_fits(batch, steps):
    """GPT-2 (4 layers), batch 4, each step's length drawn from 128 to 1024
    (seeded; the first step 1024), under 8G, beside a buffer the job sizes
    after its first step so that about 1.3 times that step's own need stays
    free (without PyTorch's cache, under --manage, torch has no peak to
    size it by, and there is none). PyTorch's cache fills what is left with
    segments of past lengths and, when a new length needs more, frees them
    and asks again (a refused cudaMalloc it recovers from); the job fits
    (truth: none: no OOM paragraph, no leak warning)."""
    import random
    rng = random.Random(13)
    m = gpt2_model(n_layer=4)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    lengths = [1024] + [rng.randrange(128, 1025, 64) for _ in range(steps - 1)]
    buffer = None
    for step, n in enumerate(lengths):
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        learn(lm_loss(m, torch.randint(0, 50257, (batch, n), device='cuda')), opt)
        need = torch.cuda.max_memory_allocated() - before
        if step == 0 and need > 0:  # no figure where caching is off (--manage): no buffer
            torch.cuda.empty_cache()
            free, _ = torch.cuda.mem_get_info()
            spare = free - int(1.3 * need) - (256 << 20)
            buffer = torch.empty(max(spare, 0), dtype=torch.uint8, device='cuda')
            print('retry_fits: step need', need, 'buffer', buffer.numel(), file=sys.stderr,
                  flush=True)
        yield
    del buffer


# The fifth held-out set (session 13, 2026-12-03, written after the fourth
# ran, committed before any of it ran): a model compiled with torch.compile,
# a leak in native code that no Python frame names, and a detector whose
# step's memory depends on its proposals.


@case
def compiled_batch(batch, steps):
    """A language model of 8 pre-norm torch.nn.TransformerEncoderLayer layers
    (width 768, 12 heads, causal), vocabulary 32000, sequence 512, compiled
    with torch.compile (Inductor, default mode), AdamW, under 6G: too large
    a batch for its first step (truth: activations)."""
    m = native_lm(width=768, heads=12, layers=8)
    step_model = torch.compile(m)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        x = torch.randint(0, 32000, (batch, 512), device='cuda')
        logits = step_model(x)
        learn(torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten()), opt)
        del logits, x
        yield


@case
def native_leak(batch, steps):
    """ResNet-18, SGD with momentum, batch 32, 224x224, under 3G, beside a
    'native extension' (the driver's cuMemAlloc through ctypes) that takes an
    8 MiB scratch buffer each step and never frees it: what outlives steps
    grows 8 MiB a step from code no Python frame of a known role names
    (truth: leak)."""
    import ctypes
    import torchvision
    cuda = ctypes.CDLL('libcuda.so.1')
    alloc = cuda.cuMemAlloc_v2
    alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    scratch = []
    for xy in image_batches(batch, steps):
        learn(class_loss(m, xy), opt)
        ptr = ctypes.c_uint64(0)
        if alloc(ctypes.byref(ptr), 8 << 20) != 0:  # the driver's out of memory (2)
            raise torch.OutOfMemoryError('cuMemAlloc of the scratch buffer: out of memory')
        scratch.append(ptr.value)  # the bug: never cuMemFree'd
        yield


@case
def detect_batch(batch, steps):
    """torchvision's Faster R-CNN (ResNet-50 FPN, random weights, 91 classes)
    in training mode on 800x800 images with 8 random boxes each, SGD with
    momentum, under 8G: too large a batch for its first step, whose memory
    depends on the proposals as much as on the images (truth: activations)."""
    import torchvision
    m = torchvision.models.detection.fasterrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=91).cuda().train()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator(device='cuda').manual_seed(7)
    for _ in range(steps):
        images = [torch.rand(3, 800, 800, device='cuda', generator=gen) for _ in range(batch)]
        targets = []
        for _ in range(batch):
            xy = torch.rand(8, 2, device='cuda', generator=gen) * 600
            wh = torch.rand(8, 2, device='cuda', generator=gen) * 150 + 20
            targets.append(dict(boxes=torch.cat([xy, xy + wh], 1),
                                labels=torch.randint(1, 91, (8,), device='cuda', generator=gen)))
        losses = m(images, targets)
        learn(sum(losses.values()), opt)
        del images, targets, losses
        yield

# The sixth held-out set (session 14, 2026-12-03, committed before any of it
# ran): a concatenating CNN under fp16, a double backward, a length
# curriculum, an optimizer switched mid-run, a cache keyed by shape, a
# gradient history, cuDNN's benchmark near the cap and periodic evaluation.


@case
def densenet_amp_batch(batch, steps):
    """torchvision's DenseNet-121 (each dense block concatenates every
    layer's output: memory far from linear in depth), 224x224, fp16 autocast
    with a GradScaler, SGD with momentum, under 6G: too large a batch for
    its first step (truth: activations)."""
    import torchvision
    m = torchvision.models.densenet121().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler('cuda')
    for x, y in image_batches(batch, steps):
        with torch.autocast('cuda', dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        scaled_learn(loss, opt, scaler)
        del loss, x, y
        yield


@case
def gradpenalty_batch(batch, steps):
    """A WGAN-GP critic (five convolutions at 128x128, layer norm, no batch
    norm) with a gradient penalty: the critic's gradient at points between
    real and generated images, taken with create_graph=True so that the
    step's backward runs through a backward (a double backward's memory),
    Adam, under 4G: too large a batch for its first step (truth:
    activations)."""
    nn = torch.nn

    def block(cin, cout, size):
        return [nn.Conv2d(cin, cout, 4, 2, 1), nn.LayerNorm([cout, size, size]),
                nn.LeakyReLU(0.2)]

    critic = nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2),
                           *block(64, 128, 32), *block(128, 256, 16), *block(256, 512, 8),
                           nn.Conv2d(512, 1, 8), nn.Flatten()).cuda()
    opt = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.0, 0.9))
    for _ in range(steps):
        real = torch.randn(batch, 3, 128, 128, device='cuda')
        fake = torch.randn(batch, 3, 128, 128, device='cuda')  # a generator's, detached
        t = torch.rand(batch, 1, 1, 1, device='cuda')
        mid = (t * real + (1 - t) * fake).requires_grad_(True)
        grad, = torch.autograd.grad(critic(mid).sum(), mid, create_graph=True)
        penalty = (grad.flatten(1).norm(dim=1) - 1).square().mean()
        learn(critic(fake).mean() - critic(real).mean() + 10 * penalty, opt)
        del real, fake, t, mid, grad, penalty
        yield


@case
def seq_growth_batch(batch, steps):
    """GPT-2 (6 layers, positions up to 8192), batch 8, on a length
    curriculum: each step's sequence 64 tokens longer than the last (64,
    128, ...), fp32 AdamW, under 6G: the step's activations grow with its
    length until one step's do not fit, mid-run, while nothing is kept from
    step to step (truth: activations; no leak warning)."""
    m = gpt2_model(n_layer=6, n_positions=8192)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        n = 64 * (step + 1)
        learn(lm_loss(m, torch.randint(0, 50257, (batch, n), device='cuda')), opt)
        yield


@case
def optimizer_switch(batch, steps):
    """Three linear layers of 8192x8192 fp32 (805 MB of weights) trained
    with plain SGD (no state) for 4 steps, then with Adam (a two-phase
    schedule): Adam's two moments, made at its first step, do not fit beside
    the weights and gradients under 3G, mid-run (truth: persistent; nothing
    leaks)."""
    m = linear_stack(8192, 3).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=1e-4)
    for step in range(steps):
        if step == 4:
            opt = torch.optim.Adam(m.parameters(), lr=1e-4)
        x = torch.randn(batch, 8192, device='cuda')
        learn(m(x).square().mean(), opt)
        del x
        yield


@case
def mask_cache_leak(batch, steps):
    """A language model of PyTorch's own layers (4 pre-norm layers of width
    512, 8 heads, no dropout, vocabulary 8000), batch 8, each step's length
    drawn from 128 to 384 (seeded), AdamW, under 4G; an additive causal mask
    per (batch, length), expanded over the heads, kept in a dict for reuse,
    a cache without a bound: most lengths are new, so what outlives steps
    grows most steps, by a mask of another size each time (up to 38 MB),
    while the longest step alone needs about a third of the device (truth:
    leak).

    Its first version (vocabulary 32000, lengths to 1024, under 6G) was
    built wrong: a long step's logits alone needed 4.85 GiB of memory of its
    own, which with the state and the context does not fit in 6G leak or
    no leak; oomlens said activations, rightly (docs/measurements.md)."""
    import random
    rng = random.Random(29)
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.0, batch_first=True,
                                       norm_first=True)
    body = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False).cuda()
    embed, head = nn.Embedding(8000, 512).cuda(), nn.Linear(512, 8000).cuda()
    opt = torch.optim.AdamW([*body.parameters(), *embed.parameters(), *head.parameters()],
                            lr=1e-4)
    masks = {}
    for _ in range(steps):
        n = rng.randrange(128, 385)
        if (batch, n) not in masks:  # the bug: never evicted
            causal = torch.full((n, n), float('-inf'), device='cuda').triu(1)
            masks[(batch, n)] = causal.expand(batch * 8, n, n).contiguous()
            del causal
        x = torch.randint(0, 8000, (batch, n), device='cuda')
        h = body(embed(x), mask=masks[(batch, n)])
        learn(torch.nn.functional.cross_entropy(head(h).flatten(0, 1), x.flatten()), opt)
        del x, h
        yield


@case
def grad_history_leak(batch, steps):
    """GPT-2 (4 layers, width 256), sequence 256, AdamW, under 3G; after
    each backward a copy of every gradient is appended to a list (gradient
    statistics for a later plot, left on the device): what outlives steps
    grows by the model's size, about 64 MB, each step (truth: leak)."""
    m = gpt2_model(n_layer=4, n_embd=256, n_head=4)
    history = []
    yield from lm_steps_seeing_grads(m, batch, 256, steps, lambda step: history.append(
        [p.grad.detach().clone() for p in m.parameters()]))  # the bug


def lm_steps_seeing_grads(m, batch, length, steps, see):
    """Language-model steps of AdamW on m, `see(step)` called between each
    backward and its optimizer step (the gradients are there)."""
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        x = torch.randint(0, 50257, (batch, length), device='cuda')
        loss = lm_loss(m, x)
        loss.backward()
        see(step)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, x
        yield


@case
def benchmark_fits(batch, steps):
    """ResNet-50 fp32, SGD with momentum, 224x224, with
    torch.backends.cudnn.benchmark on (cuDNN times its algorithms at each
    new shape, with workspaces as large as memory allows; PyTorch skips
    those it cannot allocate), batch 64 under 8G, every fourth batch a third
    of that (a sampler's remainder: a new shape, timed again), 12 steps
    (truth: none: the job fits; no OOM paragraph, no leak warning)."""
    import torchvision
    torch.backends.cudnn.benchmark = True
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        n = batch if step % 4 != 3 else batch // 3
        x = torch.randn(n, 3, 224, 224, device='cuda')
        y = torch.randint(0, 1000, (n,), device='cuda')
        learn(torch.nn.functional.cross_entropy(m(x), y), opt)
        del x, y
        yield


@case
def periodic_eval_fits(batch, steps):
    """GPT-2 (6 layers), fp32 AdamW, batch 4, sequence 512, under 8G; after
    every fifth step an evaluation under torch.no_grad at 3 times the batch,
    3 batches (no graph, freed at once): iterations of two kinds, one with a
    larger forward than training's, nothing kept (truth: none: no OOM
    paragraph, no leak warning)."""
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        m.train()
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda')), opt)
        if step % 5 == 4:
            m.eval()
            with torch.no_grad():
                for _ in range(3):
                    lm_loss(m, torch.randint(0, 50257, (3 * batch, 512), device='cuda')).item()
        yield


# The seventh held-out set (session 15, 2026-12-03), written before any of
# it ran: a leak under lengths that vary step to step, a Llama-style model
# with grouped-query attention in bf16, gradient accumulation near the cap,
# an RNN's state carried with its graph, a ConvNeXt, DataLoader workers
# that use the device, a generation server that fits, multi-scale images.


@case
def varlen_leak(batch, steps):
    """A GPT-2 of 4 layers (width 512, 8 heads, vocabulary 8000), AdamW,
    batch 8, each step's length drawn from 128 to 512 (seeded), under 4G;
    each step's hidden states (`output_hidden_states`, five tensors of
    batch x length x 512) are kept for a later probe, detached but on the
    device: what outlives steps grows by 10-42 MB a step, by another amount
    each step, from the forward's own call sites (truth: leak)."""
    import random
    rng = random.Random(31)
    m = gpt2_model(n_layer=4, n_embd=512, n_head=8, vocab_size=8000)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    probe = []
    for _ in range(steps):
        x = torch.randint(0, 8000, (batch, rng.randrange(128, 513)), device='cuda')
        out = m(input_ids=x, labels=x, output_hidden_states=True)
        probe.append([h.detach() for h in out.hidden_states])  # the bug: left on the device
        learn(out.loss, opt)
        del out, x
        yield


@case
def llama_gqa_batch(batch, steps):
    """A Llama-style model made from its config in bf16 (8 layers, hidden
    1024, 16 heads over 4 key/value heads, SwiGLU 2816, vocabulary 32000,
    untied head), AdamW, sequence 2048, under 8G: too large a batch for its
    first step (truth: activations)."""
    from transformers import LlamaConfig
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                      num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                      max_position_embeddings=2048, tie_word_embeddings=False)
    m = hf_from_config(cfg, torch.bfloat16).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    xs = (torch.randint(0, 32000, (batch, 2048), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lm_loss)


@case
def accum_fits(batch, steps):
    """GPT-2 124M fp32 AdamW, sequence 1024, batch 2 a micro-step, the
    gradients accumulated over 4 micro-steps before each optimizer step
    (kept between micro-steps, set to None after the step), `steps`
    micro-steps, under 7G (truth: none: the job fits; no leak warning,
    although the gradients live through three forwards in four)."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        x = torch.randint(0, 50257, (batch, 1024), device='cuda')
        (lm_loss(m, x) / 4).backward()
        if step % 4 == 3:
            opt.step()
            opt.zero_grad(set_to_none=True)
        del x
        yield


@case
def stream_state_leak(batch, steps):
    """Scoring a long token stream in chunks of 128 with the two-layer LSTM
    language model (cuDNN, hidden 1024), batch 16, its state carried from
    chunk to chunk so the stream stays one sequence, but without
    torch.no_grad and without detaching the state: each chunk's graph, the
    LSTM's saved buffers among it, stays reachable from the state, so every
    chunk's activations are kept, under 3G (truth: leak)."""
    m = LstmLm().cuda()
    m.eval()
    state = None
    for _ in range(steps):
        x = torch.randint(0, 10000, (batch, 128), device='cuda')
        hidden, state = m.rnn(m.emb(x), state)  # the bug: state keeps its graph
        logits = m.head(hidden)
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten()).item()
        del hidden, logits, x
        yield


@case
def convnext_batch(batch, steps):
    """torchvision's ConvNeXt-Tiny (depthwise 7x7 convolutions, LayerNorm,
    an MLP four times as wide in every block), fp32, AdamW, 224x224, under
    8G: too large a batch for its first step (truth: activations)."""
    yield from train_steps(*convnext_t('adamw'), image_batches(batch, steps), class_loss)


_WORKER_TABLE = None


def gpu_table_worker_init(worker_id):
    """Each DataLoader worker puts a 1.5 GiB lookup table on the device (the
    mistake: workers should not use the GPU)."""
    global _WORKER_TABLE
    _WORKER_TABLE = torch.zeros(3 << 29, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()


class GpuTableTokens(torch.utils.data.Dataset):
    """Token sequences of 1024, made in the worker with the help of its
    device table."""

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randint(0, 50257, (1024,), generator=g)
        if _WORKER_TABLE is not None:
            x[0] = int(_WORKER_TABLE[i % 1024].item())  # the table is used, on the GPU
        return x


@case
def worker_external(batch, steps):
    """GPT-2 124M fp32 AdamW, batch 2, sequence 1024, under 12G (batch 5 fits
    alone), fed by a DataLoader of 4 spawned workers, each of which makes a
    CUDA context and a 1.5 GiB table on the device when it starts: about
    8 GiB held by the job's own worker processes, so the training runs out
    (truth: external: memory held by other processes; the fix is workers
    that do not touch the GPU).

    Its first run (session 15) made tables of 768 MiB (3 << 28), not 1.5
    GiB: the workers held about 5 GiB with their contexts and the job
    fitted, as none of oomlens's runs said otherwise. Its third run (1.5
    GiB tables, training from the first batch) ran out in a worker, whose
    table came after the training's first step: the job now takes a batch
    from each worker before it trains."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    loader = torch.utils.data.DataLoader(GpuTableTokens(), batch_size=batch, num_workers=4,
                                         multiprocessing_context='spawn',
                                         worker_init_fn=gpu_table_worker_init,
                                         persistent_workers=True)
    batches = iter(loader)
    # one batch from each worker first: every worker has made its table
    # before the training asks for memory (else a worker may run out first)
    ready = [next(batches) for _ in range(4)]
    xs = (x.cuda() for x in ready + [next(batches) for _ in range(max(0, steps - 4))])
    yield from train_steps(m, opt, xs, lm_loss)


@case
def serve_fits(batch, steps):
    """Inference serving: GPT-2 `generate`, greedy, 96 new tokens forced,
    under no_grad, one call a step, each call's batch drawn from 4 to
    `batch` and its prompt from 64 to 256 tokens (seeded), under 4G: each
    call's key/value cache grows with every token and is freed when the
    call returns, nothing is kept, and every call fits (truth: none: no OOM
    paragraph, no leak warning)."""
    import random
    rng = random.Random(37)
    m = gpt2_model()
    m.eval()
    for _ in range(steps):
        n = rng.choice([b for b in (4, 8, 16, 32) if b <= max(batch, 4)])
        prompt = rng.choice((64, 128, 256))
        greedy_generate(m, torch.randint(0, 50000, (n, prompt), device='cuda'), 96)
        yield


@case
def multiscale_batch(batch, steps):
    """ResNet-50 fp32, SGD with momentum, batch 48, multi-scale training:
    each step's image size drawn from 224, 256 and 288 for 8 steps (seeded),
    then from 320, 352 and 384 (the schedule's second stage), under 8G (87
    fit at 224): the larger images' activations do not fit, mid-run, while
    nothing is kept from step to step (truth: activations)."""
    import random
    import torchvision
    rng = random.Random(41)
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        size = rng.choice((224, 256, 288) if step < 8 else (320, 352, 384))
        learn(class_loss(m, next(image_batches(batch, 1, size))), opt)
        yield


# The eighth held-out set (session 16, 2026-12-04), written before any of
# it ran: one sequence too long for batch 1, a contrastive loss whose
# memory grows with the square of the batch, model snapshots kept on the
# device, PyTorch's own memory fraction, token-budget buckets whose longest
# bucket comes late, a LoRA fine-tune that fits, a leak under
# expandable_segments, and a pairwise distance matrix no device holds.


def llama_eager(layers, hidden, inter, heads, positions, dtype=torch.bfloat16):
    """A Llama-style causal LM from its config with PyTorch's eager
    attention (the (batch, heads, L, L) score matrices are made)."""
    from transformers import LlamaConfig
    cfg = LlamaConfig(vocab_size=32000, hidden_size=hidden, intermediate_size=inter,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=heads, max_position_embeddings=positions,
                      tie_word_embeddings=False, attn_implementation='eager')
    m = hf_from_config(cfg, dtype)
    m.config._attn_implementation = 'eager'
    return m.cuda()


@case
def seq_batch1(batch, steps):
    """A Llama-style model in bf16 (8 layers, hidden 1024, 16 heads,
    vocabulary 32000, about 0.33 GiB of weights) with eager attention,
    AdamW, one sequence of 4096 tokens a step, under 10G: each layer keeps
    its attention probabilities (in fp32 from the softmax and in bf16), about
    1.5 GiB a layer, so even batch 1 runs out in the first forward while the
    weights and optimizer state fit many times over (truth: activations; no
    batch fits: the fix is a shorter sequence, memory-efficient attention or
    checkpointing)."""
    m = llama_eager(8, 1024, 2816, 16, 4096)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    xs = (torch.randint(0, 32000, (batch, 4096), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lm_loss)


class Tower(torch.nn.Module):
    """One side of a two-tower contrastive model: an MLP from precomputed
    768-wide features to a normalised 512-wide embedding."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(768, 1024), torch.nn.GELU(),
                                       torch.nn.Linear(1024, 512))

    def forward(self, x):
        return torch.nn.functional.normalize(self.net(x), dim=-1)


@case
def contrastive_batch(batch, steps):
    """CLIP-style contrastive training of two small towers on precomputed
    features, fp32, AdamW, batch 32768, under 12G: the image-text logits
    are batch x batch (4 GiB at 32768) and the symmetric cross-entropy keeps
    a log-softmax of them in each direction, so the step's memory grows with
    the square of the batch, not linearly (truth: activations, first step)."""
    img, txt = Tower().cuda(), Tower().cuda()
    opt = torch.optim.AdamW(list(img.parameters()) + list(txt.parameters()), lr=1e-4)
    for _ in range(steps):
        a = torch.randn(batch, 768, device='cuda')
        b = torch.randn(batch, 768, device='cuda')
        logits = img(a) @ txt(b).T * 14.3
        target = torch.arange(batch, device='cuda')
        loss = (torch.nn.functional.cross_entropy(logits, target) +
                torch.nn.functional.cross_entropy(logits.T, target)) / 2
        learn(loss, opt)
        del a, b, logits, loss
        yield


@case
def reload_leak(batch, steps):
    """GPT-2 124M fp32 AdamW, batch 2, sequence 1024, under 10G; every other
    step a snapshot of the model (`copy.deepcopy`, for an averaged evaluation
    at the end) is kept in a list, on the device: 0.5 GB more outlives every
    second step, in copies of the weights, not in activations (truth: leak)."""
    import copy
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    snapshots = []
    for step in range(steps):
        x = torch.randint(0, 50257, (batch, 1024), device='cuda')
        learn(lm_loss(m, x), opt)
        if step % 2 == 1:
            snapshots.append(copy.deepcopy(m))  # the bug: kept on the device
        del x
        yield


@case
def fraction_batch(batch, steps):
    """GPT-2 124M fp32 AdamW, sequence 1024, batch 8 (5 fit under 12G), in a
    job that shares its GPU and so limits itself with
    `torch.cuda.set_per_process_memory_fraction` to 10 GiB, under 12G: in
    observe mode PyTorch's caching allocator refuses at its own limit
    without any cudaMalloc failing; under --manage (PyTorch's cache off) the
    12G cap is reached instead (truth: activations, first step, in both)."""
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction((10 << 30) / total)
    yield from gpt2_batch(batch, steps)


@case
def bucket_batch(batch, steps):
    """Token-budget batching: a GPT-2 of 6 layers (positions 2048, eager
    attention, no dropout), fp32 AdamW, each batch holding 4096 tokens of
    one length (batch = 4096 / length), lengths drawn from 128, 256 and 512
    for 8 steps, then from 1024 and 2048 (longer documents later in the
    data), under 7G: tokens per batch stay the same but attention's
    memory grows with the length, so a long bucket runs out mid-run while
    nothing is kept (truth: activations).

    Its first run (session 16) held 16384 tokens a batch under 12G: the
    logits of 16384 tokens (3 GiB, and their fp32 loss) ran out in the
    first step, at length 128: activations still, but not mid-run. Its
    second (4096 tokens, 10G) fitted: 7.66 GiB at its peak over all 16
    steps, longest buckets included; now under 7G."""
    import random
    rng = random.Random(43)
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_layer=6, n_positions=2048, attn_pdrop=0.0, resid_pdrop=0.0,
                     embd_pdrop=0.0)
    cfg._attn_implementation = 'eager'
    m = GPT2LMHeadModel(cfg).cuda()
    m.config._attn_implementation = 'eager'
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        length = rng.choice((128, 256, 512) if step < 8 else (1024, 2048))
        x = torch.randint(0, 50257, (4096 // length, length), device='cuda')
        learn(lm_loss(m, x), opt)
        del x
        yield


class LoraLinear(torch.nn.Module):
    """A frozen linear layer with a trainable low-rank update (rank 16)."""

    def __init__(self, base, rank=16):
        super().__init__()
        self.base = base
        self.a = torch.nn.Parameter(torch.randn(rank, base.in_features, device=base.weight.device,
                                                dtype=base.weight.dtype) / rank)
        self.b = torch.nn.Parameter(torch.zeros(base.out_features, rank,
                                                device=base.weight.device,
                                                dtype=base.weight.dtype))

    def forward(self, x):
        return self.base(x) + (x @ self.a.T) @ self.b.T


@case
def lora_fits(batch, steps):
    """LoRA fine-tuning: a Llama-style model in bf16 (12 layers, hidden
    2048, about 1.5 GB of weights), frozen, with rank-16 adapters on its
    query and value projections, gradient checkpointing, AdamW on the
    adapters only, batch 4, sequence 1024, under 5G, 16 steps: gradients
    and optimizer state are tiny and the activations are recomputed (truth:
    none: no OOM paragraph, no leak warning)."""
    yield from lora_llama_steps(batch, steps, 1024, checkpointing=True)


def lora_llama_steps(batch, steps, length, checkpointing):
    """The Llama-style model of lora_fits in bf16, frozen, rank-16 adapters
    on its query and value projections, AdamW on the adapters, trained at
    batch `batch` and sequence `length`, a yield a step."""
    from transformers import LlamaConfig
    cfg = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5504,
                      num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=16,
                      max_position_embeddings=1024, tie_word_embeddings=False)
    m = hf_from_config(cfg, torch.bfloat16).cuda()
    m.requires_grad_(False)
    for layer in m.model.layers:
        layer.self_attn.q_proj = LoraLinear(layer.self_attn.q_proj)
        layer.self_attn.v_proj = LoraLinear(layer.self_attn.v_proj)
    if checkpointing:
        m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})
    m.train()
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4)
    xs = (torch.randint(0, 32000, (batch, length), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lm_loss)


@case
def expandable_leak(batch, steps):
    """ResNet-18 fp32, SGD with momentum, batch 16, 128x128 images, with
    PyTorch's `expandable_segments:True` (the field guide's advice) set by
    the job before CUDA starts, under 4G; each step's loss is appended to a
    list for a plot, with its graph: every step's saved activations stay
    (truth: leak)."""
    os.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'
    import torchvision
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for xy in image_batches(batch, steps, size=128):
        loss = class_loss(m, xy)
        loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss)  # the bug: the loss keeps its graph
        yield


@case
def pairwise_impossible(batch, steps):
    """Deduplication by pairwise distances: 200,000 embeddings of 128
    (100 MB) and `torch.cdist` of all of them against all, under 12G: the
    200,000 x 200,000 distance matrix alone is 149 GiB, more than the whole
    device (truth: impossible: no batch, cap or allocator holds it; the fix
    is to compare in blocks)."""
    x = torch.randn(200000, 128, device='cuda')
    torch.cdist(x, x)
    yield


# The ninth held-out set (session 17, 2026-12-04), written before any of
# it ran: a serving job whose per-request key/value caches fragment
# PyTorch's cache (and the same job at a smaller budget, which fits), a
# mixture of experts whose routing collapses mid-run, a feature cache that
# fills and stops growing, and CUDA graphs captured for every new shape.


def serve_kv(budget_share, max_active, steps, seed=47):
    """Continuous-batching inference with each request's key/value cache
    preallocated at its full length (bf16, 24 layers x keys and values x
    hidden 2048: 192 KiB a token), as servers did before paged attention:
    requests of 256 to 8192 tokens (48 MiB to 1.5 GiB of cache) are
    admitted while fewer than `max_active` run and their caches stay
    within `budget_share` of the device's total (torch.cuda.mem_get_info:
    the cap under oomlens --capacity); each step every running request
    attends over its cache (a decode step's small temporaries) and
    requests finish after 1 to 64 steps, in whatever order.

    Its first run (session 17) stopped at the first finished request: the
    list of requests was searched with `list.remove`, which compares
    tensors; nothing ran out."""
    import random
    rng = random.Random(seed)
    layers, hidden = 24, 2048
    _, total = torch.cuda.mem_get_info()
    budget = budget_share * total
    q = torch.randn(hidden, device='cuda', dtype=torch.bfloat16)
    active, live = [], 0
    for _ in range(steps):
        while len(active) < max_active:
            length = rng.randint(256, 8192)
            size = layers * 2 * length * hidden * 2
            if live + size > budget:
                break
            cache = torch.empty((layers, 2, length, hidden), device='cuda', dtype=torch.bfloat16)
            cache[:, :, :length // 2].normal_()  # the prompt's prefill
            active.append([cache, rng.randint(1, 64)])
            live += size
        for r in active:
            keys = r[0][0, 0]
            scores = torch.softmax((keys @ q).float(), dim=0)
            scores.to(keys.dtype) @ keys  # the step's output, dropped
            r[1] -= 1
        live -= sum(r[0].numel() * 2 for r in active if r[1] <= 0)
        active = [r for r in active if r[1] > 0]  # finished caches freed
        yield


@case
def serve_frag(batch, steps):
    """serve_kv() with at most `batch` (16) requests running and their
    caches within 70% of the device (the field guides' rule: keep to
    70-80% of the limit), under 8G: the caches never pass 5.6 GiB (a
    prefill's temporary adds up to 0.75 GiB: `normal_` of a strided
    slice), but PyTorch's cache splits a finished request's block for the smaller
    ones that follow, and a long request then finds no piece that holds it
    while the free pieces add up to more than it asks (truth:
    fragmentation under PyTorch's cache; oomlens's pool maps its free
    chunks where they are wanted and fits: under --manage, none).
    Simulated before it ran (the same pattern as a trace, `oomlens replay
    --policy pytorch`): the model of PyTorch's cache ran out after ~250
    steps with 3.6 GiB free in pieces, the largest 0.9 GiB, for a 1.4 GiB
    request; oomlens's pool peaked at 5.69 GiB."""
    yield from serve_kv(0.70, batch, steps)


@case
def serve_half_fits(batch, steps):
    """serve_kv() with its caches within 50% of the device, under 8G: the
    same fragmenting pattern, but PyTorch's cache, freeing its cached
    blocks and retrying before it gives up, always finds room (simulated:
    7.9 GiB reserved at most for 4.0 GiB of tensors) (truth: none in both
    modes: no OOM paragraph, no leak warning).

    Its first live run (session 17) disproved the simulation: PyTorch's
    cache ran out at step 1037 with 2.96 GiB of tensors and 3.50 GiB
    reserved but free in pieces, and --manage fitted. Its live memory is
    under half the device by construction, so the truth under PyTorch's
    cache is fragmentation (relabelled in diagnosis_check.py); the model of
    PyTorch's cache does not reproduce it (its replay fits at 7.99 GiB)."""
    yield from serve_kv(0.50, batch, steps)


@case
def moe_spike(batch, steps):
    """A mixture-of-experts stack (4 layers, 16 experts of hidden 512 and
    1024, top-1 routing, fp32, AdamW: 0.5 GiB of weights) that dispatches
    tokens into a padded (experts x most tokens any expert got x hidden)
    buffer, batch 16 of 1024 tokens (16384), under 8G. For 8 steps the
    inputs are random and the routing balanced (about 1000 tokens an
    expert, 0.8 GiB of activations a step); then the data shifts (every
    token gets a common component the router sends to one expert) and one
    expert gets every token: the padded buffers and the experts'
    intermediates grow 16-fold in one step while nothing is kept (truth:
    activations, mid-run; the fix is an expert capacity factor that drops
    or reroutes overflow tokens, or a smaller batch)."""
    hidden, inner, experts, layers = 512, 1024, 16, 4
    torch.manual_seed(5)
    router = [torch.nn.Linear(hidden, experts).cuda() for _ in range(layers)]
    w1 = [torch.nn.Parameter(torch.randn(experts, hidden, inner, device='cuda') / 32)
          for _ in range(layers)]
    w2 = [torch.nn.Parameter(torch.randn(experts, inner, hidden, device='cuda') / 64)
          for _ in range(layers)]
    params = [p for r in router for p in r.parameters()] + w1 + w2
    opt = torch.optim.AdamW(params, lr=1e-4)
    tokens = batch * 1024
    shift = router[0].weight[3].detach() * 40
    for step in range(steps):
        x = torch.randn(tokens, hidden, device='cuda')
        if step >= 8:
            x = x * 0.05 + shift
        for layer in range(layers):
            gate = torch.softmax(router[layer](x), dim=-1)
            weight, idx = gate.max(dim=-1)
            load = torch.bincount(idx, minlength=experts)
            most = int(load.max())
            order = torch.argsort(idx)
            slot = torch.arange(tokens, device='cuda') - torch.repeat_interleave(
                torch.cumsum(load, 0) - load, load)
            buf = x.new_zeros(experts, most, hidden)
            buf[idx[order], slot] = x[order]
            y = torch.bmm(torch.nn.functional.gelu(torch.bmm(buf, w1[layer])), w2[layer])
            out = torch.empty_like(x)
            out[order] = y[idx[order], slot]
            x = x + out * weight[:, None]
        learn(x.pow(2).mean(), opt)
        yield


@case
def cache_fits(batch, steps):
    """Features cached on the device by item: each step draws `batch` (64)
    of 4000 catalogue items, encodes those not yet cached (an MLP from
    4096 inputs to 262,144 features: 1 MiB each, kept by id, detached) and
    trains a small head on the step's features, fp32 AdamW, under 8G, 400
    steps: the cache grows by up to 64 MiB a step at first and less as the
    catalogue fills (4000 items, 3.9 GiB, all seen after ~500 steps), then
    stops: a bounded cache, not a leak (truth: none: no OOM, and no leak
    warning standing at the end)."""
    import random
    rng = random.Random(53)
    encoder = torch.nn.Sequential(torch.nn.Linear(4096, 1024), torch.nn.GELU(),
                                  torch.nn.Linear(1024, 262144)).cuda()
    head = torch.nn.Linear(262144, 16).cuda()
    opt = torch.optim.AdamW(head.parameters(), lr=1e-4)
    inputs = torch.randn(4000, 4096)  # the catalogue's raw inputs, on the host
    cache = {}
    for _ in range(steps):
        ids = rng.sample(range(4000), batch)
        new = [i for i in ids if i not in cache]
        if new:
            with torch.no_grad():
                feats = encoder(inputs[new].cuda())
            for i, f in zip(new, feats):
                cache[i] = f.clone()
            del feats
        x = torch.stack([cache[i] for i in ids])
        learn(torch.nn.functional.cross_entropy(head(x), torch.zeros(batch, dtype=torch.long,
                                                                       device='cuda')), opt)
        del x
        yield


@case
def graph_leak(batch, steps):
    """Inference replayed through CUDA graphs (torch.cuda.graph), one
    captured per input shape and kept in a dict by shape, as a server that
    cuts its launch overhead does; an MLP of 6 layers of 2048 (fp32), `batch`
    (2) sequences a call of a length drawn from 1 to 4096 without bucketing,
    under 3G: nearly every call meets a new shape, and each captured graph
    keeps its static input, output and the intermediates of its private
    memory pool: memory that outlives every call grows by tens of MiB a
    call (truth: leak; the fix is to bucket the lengths, pad to a few
    shapes, or bound the dict)."""
    import random
    rng = random.Random(59)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(2048, 2048), torch.nn.GELU()]
    m = torch.nn.Sequential(*layers).cuda().eval()
    graphs = {}
    side = torch.cuda.Stream()
    for _ in range(steps):
        length = rng.randint(1, 4096)
        shape = (batch, length, 2048)
        if shape not in graphs:
            static_in = torch.randn(shape, device='cuda')
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side), torch.no_grad():
                m(static_in)  # warm-up on a side stream, as the docs ask
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g), torch.no_grad():
                static_out = m(static_in)
            graphs[shape] = (g, static_in, static_out)
        g, static_in, static_out = graphs[shape]
        static_in.normal_()
        g.replay()
        static_out.sum().item()
        yield


# The tenth held-out set (session 17, 2026-12-04), written before any of
# it ran: optimizers re-made for each phase and the old ones kept, a
# rolling window of on-device checkpoints that stops growing, and the
# fragmenting server with the fix oomlens advises for it.


@case
def optimizer_leak(batch, steps):
    """GPT-2 (6 layers) fp32, batch `batch` (4), sequence 512, under 6G; every
    3 steps a new AdamW is made for the next learning-rate phase and the
    old one is appended to a list (to log its state at the end): each new
    optimizer makes its moments (twice the weights, 0.6 GiB) at its first
    step while the old ones keep theirs: what outlives steps grows by the
    optimizer's state every third step (truth: leak)."""
    m = gpt2_model(n_layer=6)
    old = []
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        if step and step % 3 == 0:
            old.append(opt)  # the bug: the old optimizer and its state are kept
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4 / (1 + step // 3))
        x = torch.randint(0, 50257, (batch, 512), device='cuda')
        learn(lm_loss(m, x), opt)
        del x
        yield


@case
def rolling_ckpt_fits(batch, steps):
    """ResNet-50 fp32, SGD with momentum, batch `batch` (32), 160x160 images,
    under 6G, 40 steps; every 4th step a copy of the weights
    (`state_dict()` cloned on the device, 98 MiB) joins a window of the last
    3, the oldest dropped: what outlives steps grows for 3 copies and then
    stays (truth: none: no OOM, and no leak warning standing at the end)."""
    import torchvision
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    window = []
    for step, xy in enumerate(image_batches(batch, steps, size=160)):
        learn(class_loss(m, xy), opt)
        if step % 4 == 3:
            window.append({k: v.detach().clone() for k, v in m.state_dict().items()})
            if len(window) > 3:
                window.pop(0)
        yield


@case
def serve_expandable_fits(batch, steps):
    """serve_frag's job (caches within 70% of the device, at most `batch`
    (16) requests, under 8G) with PYTORCH_CUDA_ALLOC_CONF=
    expandable_segments:True set by the job before CUDA starts, the fix
    oomlens's fragmentation paragraph names: PyTorch's segments grow in
    place and freed pages are unmapped, so the pieces that ran serve_frag
    out do not form (truth: none in both modes)."""
    os.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'
    yield from serve_kv(0.70, batch, steps)


# The eleventh held-out set (session 17, 2026-12-04), written before any
# of it ran: a dataset that caches its samples on the device, a graph
# network whose largest graph comes late, JAX preallocating in the same
# process, and an lru_cache of device tensors that fills and churns.


@case
def dataset_cache_leak(batch, steps):
    """A torch Dataset of 200,000 samples that moves each sample to the
    device on first access and keeps it there (`self.cache[i] = x.cuda()`,
    to save the host-to-device copy next epoch); a DataLoader of `batch`
    (64) shuffled samples a step, each sample a 3x224x224 float image (588
    KiB), ResNet-18 fp32 SGD, under 6G: 37 MiB more outlives every step
    until the device is full, long before the epoch (117 GiB of samples)
    ends (truth: leak)."""
    import torchvision

    class DeviceCachingDataset(torch.utils.data.Dataset):
        def __init__(self, n):
            self.n, self.cache = n, {}

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if i not in self.cache:
                g = torch.Generator().manual_seed(i)
                self.cache[i] = (torch.randn(3, 224, 224, generator=g).cuda(), i % 1000)
            return self.cache[i]  # the bug: every sample stays on the device

    data = torch.utils.data.DataLoader(DeviceCachingDataset(200000), batch_size=batch,
                                       shuffle=True, num_workers=0)
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for step, (x, y) in enumerate(data):
        if step >= steps:
            break
        learn(torch.nn.functional.cross_entropy(m(x), y.cuda()), opt)
        del x, y
        yield


@case
def gnn_batch(batch, steps):
    """A 3-layer graph convolutional network (hidden 512, fp32, AdamW) on
    random graphs with sparse adjacency (torch.sparse.mm), `batch` (8)
    graphs merged a step, each of 2,000-20,000 nodes with 16 edges a node
    for 10 steps, then a dataset's large graphs (300,000-400,000 nodes)
    from step 10, under 6G: the node features and their activations grow
    with the nodes the data brings, nothing is kept (truth: activations,
    mid-run)."""
    import random
    rng = random.Random(61)
    hidden = 512
    layers = torch.nn.ModuleList([torch.nn.Linear(128, hidden)] +
                                 [torch.nn.Linear(hidden, hidden) for _ in range(2)]).cuda()
    head = torch.nn.Linear(hidden, 10).cuda()
    opt = torch.optim.AdamW(list(layers.parameters()) + list(head.parameters()), lr=1e-3)
    for step in range(steps):
        lo, hi = (2000, 20000) if step < 10 else (300000, 400000)
        n = sum(rng.randint(lo, hi) for _ in range(batch))
        src = torch.randint(0, n, (16 * n,), device='cuda')
        dst = torch.randint(0, n, (16 * n,), device='cuda')
        adj = torch.sparse_coo_tensor(torch.stack([src, dst]),
                                      torch.full((16 * n,), 1 / 16, device='cuda'), (n, n))
        x = torch.randn(n, 128, device='cuda')
        for layer in layers:
            x = torch.relu(torch.sparse.mm(adj, layer(x)))
        loss = torch.nn.functional.cross_entropy(head(x), torch.randint(0, 10, (n,), device='cuda'))
        learn(loss, opt)
        del adj, x, loss, src, dst
        yield


@case
def jax_external(batch, steps):
    """A job that computes a feature transform with JAX first (one jitted
    matrix product, its result copied to the host) and then trains GPT-2
    at `batch` (2) with PyTorch in the same process, under 12G: JAX's
    allocator preallocates 75% of the device's memory at its first
    operation (XLA_PYTHON_CLIENT_PREALLOCATE's default) and keeps it, so the
    training, which fits alone (batch 5 does), runs out (truth: external:
    memory held in this process outside PyTorch; the fix is
    XLA_PYTHON_CLIENT_PREALLOCATE=false or a smaller
    XLA_PYTHON_CLIENT_MEM_FRACTION)."""
    import jax
    import jax.numpy as jnp
    a = jnp.ones((2048, 2048), dtype=jnp.float32)
    features = jax.device_get(jax.jit(lambda m: m @ m)(a))
    print('jax features', features.shape, 'on', jax.devices()[0], file=sys.stderr, flush=True)
    yield from gpt2_batch(batch, steps)


@case
def lru_fits(batch, steps):
    """Attention biases built per sequence length and memoised with
    `functools.lru_cache(maxsize=64)` on the device ((16, L, L) fp32 for a
    length L drawn from 256 to 1024 in steps of 8: up to 64 MiB each),
    GPT-2 (6 layers) fp32 AdamW at `batch` (2) adding the step's bias to a
    probe loss, under 8G, 300 steps: the cache fills with 64 biases (about
    1.5 GiB) and then evicts one for each new length, so what outlives
    steps rises and then stays (truth: none: no OOM, and no leak warning
    standing at the end).

    Its first live run (session 17): under --manage as built (warned at
    iteration 5, withdrawn at 109 as stopped); under PyTorch's cache it ran
    out at step 188 with 4.58 GiB of tensors and 2.67 GiB reserved but free
    in pieces for a 370 MiB request: the truth under PyTorch's cache is
    fragmentation (relabelled in diagnosis_check.py)."""
    import functools
    import random
    rng = random.Random(67)

    @functools.lru_cache(maxsize=64)
    def bias_for(length):
        pos = torch.arange(length, device='cuda', dtype=torch.float32)
        return -(pos[None, :, None] - pos[None, None, :]).abs() * torch.linspace(
            0.01, 0.2, 16, device='cuda')[:, None, None]

    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        length = rng.randrange(256, 1025, 8)
        x = torch.randint(0, 50257, (batch, length), device='cuda')
        loss = lm_loss(m, x) + 1e-6 * bias_for(length).mean()
        learn(loss, opt)
        del x, loss
        yield


# The twelfth held-out set (session 17, 2026-12-04), written before it
# ran: a leak that pauses while the job validates.


@case
def epoch_leak(batch, steps):
    """GPT-2 (6 layers) fp32 AdamW, batch `batch` (4), sequence 256, under
    8G, in epochs of 10 training steps and 20 validation steps (no_grad);
    each training step appends its logits, detached, to a list for an
    epoch-level calibration metric that is never cleared (4 x 256 x 50257
    fp32: 196 MiB a step): what outlives steps grows through each epoch's
    training and stands still through its validation, until the device is
    full in the third epoch (truth: leak; the warning must stand when it
    runs out)."""
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    kept = []
    for step in range(steps):
        x = torch.randint(0, 50257, (batch, 256), device='cuda')
        if step % 30 < 10:
            out = m(input_ids=x, labels=x)
            kept.append(out.logits.detach())  # the bug: never cleared
            learn(out.loss, opt)
            del out
        else:
            with torch.no_grad():
                m(input_ids=x, labels=x).loss.item()
        del x
        yield



@case
def expandable_batch(batch, steps):
    """gpt2_batch (GPT-2 124M fp32 AdamW, sequence 1024, batch 8; 5 fit
    under 12G) with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True set by
    the job before CUDA starts, under 12G: PyTorch's memory is made with
    cuMemCreate, in pages, as another library's large handles are (truth:
    activations, first step: not memory held elsewhere)."""
    os.environ['PYTORCH_CUDA_ALLOC_CONF'] = 'expandable_segments:True'
    yield from gpt2_batch(batch, steps)


# The thirteenth held-out set (session 18, 2026-12-04), written before any
# of it ran: memory kept once every k steps (weight snapshots, a window of
# gradient accumulation, a logging interval), a bounded log of the same
# kind, and a windowed-attention vision transformer's first step.


@case
def snapshot_leak(batch, steps):
    """ResNet-50 fp32, SGD with momentum, batch `batch` (16), 160x160 images,
    under 3G; every 6th step a copy of the weights (state_dict cloned on
    the device, about 100 MB) is appended to a list for weight averaging
    that is never trimmed: what outlives steps rises by the weights once
    every 6 steps and stays flat in between (truth: leak, warned before
    the OOM)."""
    import torchvision
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    snapshots = []
    for step, (x, y) in enumerate(image_batches(batch, steps, size=160)):
        learn(torch.nn.functional.cross_entropy(m(x), y), opt)
        if step % 6 == 5:
            snapshots.append({k: v.detach().clone() for k, v in m.state_dict().items()})
        del x, y
        yield


@case
def accum_logits_leak(batch, steps):
    """GPT-2 (6 layers) fp32 AdamW, micro-batch `batch` (2), sequence 512,
    gradient accumulation over 4 micro-steps, under 6G; at each window's
    end the last micro-step's logits are kept, detached, for a calibration
    metric never computed (2 x 512 x 50257 fp32: 196 MiB): what outlives
    micro-steps rises once every 4 of them (truth: leak, warned before the
    OOM)."""
    kept = []
    yield from accumulating_lm_steps(batch, steps, lambda logits: kept.append(
        logits.detach()))  # the bug: never cleared


def accumulating_lm_steps(batch, steps, window_end, layers=6, sequence=512, window=4,
                          micro_step=None):
    """GPT-2 (`layers` layers) fp32 AdamW, gradient accumulation over
    `window` micro-steps of `batch` sequences of `sequence` (1: none);
    `window_end(logits)` gets each window's last logits after its optimizer
    step, and `micro_step(step, logits)`, where given, every micro-step's."""
    m = gpt2_model(n_layer=layers)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        x = torch.randint(0, 50257, (batch, sequence), device='cuda')
        out = m(input_ids=x, labels=x)
        (out.loss / window).backward()
        if step % window == window - 1:
            opt.step()
            opt.zero_grad(set_to_none=True)
            window_end(out.logits)
        if micro_step:
            micro_step(step, out.logits)
        del out, x
        yield


def log_hidden_steps(batch, steps, keep):
    """GPT-2 (6 layers) fp32 AdamW, batch `batch`, sequence 512; every 10th
    step runs with output_hidden_states and hands the hidden states (7 of
    2 x 512 x 768 fp32 at batch 2: 22 MB) to `keep`.

    Both jobs below were first run at batch 4 (session 18), which does not
    fit a first step under 4G: both ran out in it, and oomlens said
    activations, "at most 3" (right, for the jobs as they ran). Batch 2
    since."""
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        x = torch.randint(0, 50257, (batch, 512), device='cuda')
        logging = step % 10 == 9
        out = m(input_ids=x, labels=x, output_hidden_states=logging)
        learn(out.loss, opt)
        if logging:
            keep(out.hidden_states)
        del out, x
        yield


@case
def sparse_log_leak(batch, steps):
    """log_hidden_steps under 4G, the hidden states of each logging step
    appended to a list for a histogram written at the end (the tensors,
    not their statistics): what outlives steps rises by 22 MB once every
    10 steps (truth: leak, warned before the OOM)."""
    logged = []
    yield from log_hidden_steps(batch, steps, logged.append)  # the bug: never cleared


@case
def ring_log_fits(batch, steps):
    """log_hidden_steps under 4G for `steps` (300), the hidden states kept
    in a deque of the last 5 logging steps: what outlives steps rises by
    22 MB every 10 steps for 50 steps, then stays (each new entry drops the
    oldest) (truth: none: no OOM, and no leak warning standing at the
    end). 150 steps at first; 300 since its batch was mended: a growth
    that stops is told from a leak after 16 quiet iterations at least."""
    import collections
    logged = collections.deque(maxlen=5)
    yield from log_hidden_steps(batch, steps, logged.append)


@case
def swin_batch(batch, steps):
    """torchvision's Swin-T (shifted-window attention, 28 M parameters),
    fp32 AdamW, 224x224, batch `batch` (256), under 8G: too large a batch
    for its first step (truth: activations, bisected)."""
    import torchvision
    m = torchvision.models.swin_t().cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    yield from train_steps(m, opt, image_batches(batch, steps), class_loss)


# The fourteenth held-out set (session 18, 2026-12-04), written before it
# ran: a low point that wobbles with the size of a prefetched batch, and
# gradients copied for statistics once every 5 steps.


@case
def prefetch_fits(batch, steps):
    """ResNet-18 fp32 SGD with momentum, batch `batch` (32), each step at an
    image size drawn from 160 to 384, the next step's batch copied to the
    device before this step's backward (a prefetcher), so a batch of 10 to
    57 MB, its size at random, outlives every iteration; under 8G, 200
    steps (truth: none: no OOM, and no leak warning standing at the end)."""
    import random
    import torchvision
    rng = random.Random(71)
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    def fetch():
        size = rng.randrange(160, 385, 32)
        return (torch.randn(batch, 3, size, size).cuda(non_blocking=True),
                torch.randint(0, 1000, (batch,)).cuda(non_blocking=True))

    x, y = fetch()
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(m(x), y)
        nxt = fetch()  # the next batch, on the device before this one's backward
        learn(loss, opt)
        del loss
        x, y = nxt
        yield


@case
def grad_stats_leak(batch, steps):
    """GPT-2 (6 layers) fp32 AdamW, batch `batch` (2), sequence 512, under
    6G; every 5th step the token embedding's gradient (50257 x 768 fp32,
    154 MB) is copied into a list for gradient-noise statistics computed at
    the end: what outlives steps rises once every 5 steps (truth: leak,
    warned before the OOM)."""
    m = gpt2_model(n_layer=6)
    grads = []

    def see(step):
        if step % 5 == 4:
            grads.append(m.transformer.wte.weight.grad.clone())  # the bug: never cleared

    yield from lm_steps_seeing_grads(m, batch, 512, steps, see)


# The fifteenth held-out set (session 18, 2026-12-04), written before it
# ran: a backward hook that keeps gradients, an evaluation every 7th step
# that keeps its graphs, and a cache by length bucket that fills at random.


@case
def grad_hook_leak(batch, steps):
    """ResNet-18 fp32 SGD with momentum, batch `batch` (32), 224x224, under
    4G; a full backward hook on layer2 appends its grad_output (the
    gradient flowing into the layer, 32 x 128 x 28 x 28 fp32: 12.8 MB) to
    a list for a gradient-norm plot: what outlives steps grows every step,
    by tensors the backward pass made on the autograd thread (truth: leak,
    warned before the OOM)."""
    import torchvision
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    seen = []
    m.layer2.register_full_backward_hook(lambda mod, gin, gout: seen.append(gout[0]))
    yield from train_steps(m, opt, image_batches(batch, steps), class_loss)


@case
def eval_every_leak(batch, steps):
    """GPT-2 (4 layers) fp32 AdamW, batch `batch` (4), sequence 512, under
    6G; every 7th step the model scores one held-out batch in eval mode,
    without torch.no_grad, and appends the logits to a list for a later
    sample table: each kept logits tensor keeps its forward's graph (truth:
    leak, warned before the OOM)."""
    m = gpt2_model(n_layer=4)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    samples = []
    for step in range(steps):
        m.train()
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda')), opt)
        if step % 7 == 6:
            m.eval()
            samples.append(m(input_ids=torch.randint(0, 50257, (1, 512), device='cuda')).logits)
        yield


@case
def bucket_cache_fits(batch, steps):
    """GPT-2 (4 layers) fp32 AdamW at `batch` (4), each step's length drawn
    from 8 buckets (128 to 1024), with an ALiBi-style bias built on the
    device the first time a bucket is seen and kept in a dict by bucket
    ((16, L, L) fp32 per layer's heads: up to 64 MiB), added to a probe
    loss; under 6G, 200 steps: what outlives steps rises at random steps,
    eight times at most, then stays (truth: none: no OOM, and no leak
    warning standing at the end)."""
    import random
    rng = random.Random(83)
    m = gpt2_model(n_layer=4)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    biases = {}
    for _ in range(steps):
        length = 128 * rng.randrange(1, 9)
        if length not in biases:
            pos = torch.arange(length, device='cuda', dtype=torch.float32)
            biases[length] = -(pos[None, :, None] - pos[None, None, :]).abs() * torch.linspace(
                0.01, 0.2, 16, device='cuda')[:, None, None]
        x = torch.randint(0, 50257, (batch, length), device='cuda')
        learn(lm_loss(m, x) + 1e-6 * biases[length].mean(), opt)
        del x
        yield


# The sixteenth held-out set (session 18, 2026-12-04), written before it
# ran: against the early warning's runs of iterations, memory that rises
# and is given back each epoch, a cache replaced at each evaluation that
# grows for three of them, and a small leak under accumulation.


@case
def epoch_metrics_fits(batch, steps):
    """ResNet-18 fp32 SGD with momentum, batch `batch` (64), 224x224, under
    6G, in epochs of 20 steps; each step keeps its layer3 features,
    detached (64 x 256 x 14 x 14 fp32: 12.8 MB), for an epoch-level probe
    computed and cleared at the epoch's end: what outlives steps rises by
    256 MB through each epoch and falls back, `steps` (100) steps (truth:
    none: no OOM, and no leak warning standing at the end)."""
    import torchvision
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    feats = []
    m.layer3.register_forward_hook(lambda mod, inp, out: feats.append(out.detach()))
    for step, (x, y) in enumerate(image_batches(batch, steps)):
        learn(torch.nn.functional.cross_entropy(m(x), y), opt)
        del x, y
        if step % 20 == 19:
            torch.stack([f.mean() for f in feats]).sum().item()  # the epoch's probe
            feats.clear()
        yield


@case
def eval_cache_fits(batch, steps):
    """GPT-2 (4 layers) fp32 AdamW, batch `batch` (4), sequence 512, under
    6G; every 10th step an evaluation under no_grad encodes the held-out
    set and keeps its last hidden states on the device until the next one
    replaces them (a retrieval cache); the held-out set grows by 32
    sequences at each of the first three evaluations (32 x 512 x 768 fp32:
    50 MB each), then stays: what outlives steps rises at three
    evaluations, then stays, `steps` (150) (truth: none: no OOM, and no
    leak warning standing at the end)."""
    m = gpt2_model(n_layer=4)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    cache = None
    for step in range(steps):
        m.train()
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda')), opt)
        if step % 10 == 9:
            rounds = min(3, (step + 1) // 10)
            m.eval()
            with torch.no_grad():
                held = torch.randint(0, 50257, (32 * rounds, 512), device='cuda')
                new = torch.cat([m.transformer(input_ids=chunk).last_hidden_state
                                 for chunk in held.split(16)])
            cache = new  # replaces the last
            del held, new
        yield


@case
def small_accum_leak(batch, steps):
    """GPT-2 (6 layers) fp32 AdamW, micro-batch `batch` (2), sequence 512,
    accumulation over 4 micro-steps, under 6G; at each window's end a
    summary of the window (its last logits' first 80 positions, a view
    cloned: 2 x 80 x 50257 fp32, 31 MB) is kept in a list never cleared,
    a tenth of what the window's own gradients come and go by (truth:
    leak, warned before the OOM)."""
    kept = []
    yield from accumulating_lm_steps(batch, steps, lambda logits: kept.append(
        logits[:, :80].detach().clone()))  # the bug: never cleared


@case
def compiled_graphs_fits(batch, steps):
    """An MLP of 4 layers of 2048 trained under torch.compile(mode=
    "reduce-overhead") (CUDA graphs of the compiled step), fp32 AdamW,
    batch `batch` (64), one shape, under 8G (truth: none). README says
    CUDA graphs cannot be captured with PyTorch's cache off (--manage)
    unless its cudaMallocAsync backend is added; scripts/gpu/graphs_check.py
    runs it both ways."""
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(2048, 2048), torch.nn.GELU()]
    m = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    step = torch.compile(lambda x: m(x).square().mean(), mode='reduce-overhead')
    for _ in range(steps):
        learn(step(torch.randn(batch, 2048, device='cuda')), opt)
        yield



# The seventeenth held-out set (session 19, 2026-12-04), written before it
# ran: a state made once in mid-training beside a leak (the warning's site
# now counts a site's growth from the first lowest point at which it held
# memory), optimizer state that grows in stages as a backbone is unfrozen
# (a growth that stops, less often than every 16 steps), and a recurrent
# model of another family too large a batch for its first step.
@case
def late_ema_leak(batch, steps):
    """GPT-2 (6 layers) fp32 AdamW, batch `batch` (4), sequence 512, under
    6G; each step keeps its last hidden state, detached, in a list for a
    probe never run (4 x 512 x 768 fp32: 6.3 MB a step), and at step 4 an
    exponential moving average of the weights is made (a copy of the
    model, 330 MB, updated in place each step after) (truth: leak, warned
    before the OOM, the list's line named, not the average's)."""
    import copy
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    kept, ema = [], None
    for step in range(steps):
        x = torch.randint(0, 50257, (batch, 512), device='cuda')
        out = m(input_ids=x, labels=x, output_hidden_states=True)
        learn(out.loss, opt)
        kept.append(out.hidden_states[-1].detach())  # the bug: never cleared
        if step == 4:
            ema = copy.deepcopy(m).requires_grad_(False)
        elif ema is not None:
            with torch.no_grad():
                torch._foreach_lerp_(list(ema.parameters()), list(m.parameters()), 0.001)
        del out, x
        yield


@case
def unfreeze_fits(batch, steps):
    """GPT-2 (12 layers) fp32 AdamW, batch `batch` (4), sequence 512, under
    8G, fine-tuned with gradual unfreezing: the top 3 blocks (and the final
    norm) train from the start and 3 more every 25 steps, AdamW's moments
    made for each as it first trains: what outlives steps rises by ~170 MB
    at steps 25, 50 and 75, and the step's own need with it, then stays,
    `steps` (120) (truth: none: no OOM, and no leak warning standing at the
    end)."""
    m = gpt2_model()
    m.requires_grad_(False)
    blocks = list(m.transformer.h)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)  # skips what has no gradient

    def unfreeze(top):
        for b in blocks[len(blocks) - top:]:
            b.requires_grad_(True)
    m.transformer.ln_f.requires_grad_(True)
    unfreeze(3)
    for step in range(steps):
        if step in (25, 50, 75):
            unfreeze(3 + 3 * (step // 25))
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda')), opt)
        yield


@case
def rnn_batch(batch, steps):
    """An LSTM language model (embedding and output of 32000 x 1024, three
    LSTM layers of 1024, cuDNN's), fp32 AdamW, sequence 256, batch `batch`
    (64), under 4G: too large a batch for its first step (truth:
    activations, bisected)."""
    m = LstmLm(vocab=32000, embed=1024, hidden=1024, layers=3).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        x = torch.randint(0, 32000, (batch, 257), device='cuda')
        _, logits = m(x[:, :-1])
        learn(torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten()), opt)
        del logits, x
        yield


# The eighteenth held-out set (session 19, 2026-12-04), written before it
# ran: memory kept once every 32 steps (twice the longest run the early
# warning reads), and a first optimizer step whose state fits but whose
# foreach update's temporaries do not.
@case
def window32_leak(batch, steps):
    """GPT-2 (4 layers) fp32 AdamW, micro-batch `batch` (2), sequence 256,
    gradient accumulation over 32 micro-steps, under 6G; at each window's
    end the last logits are cloned into a list never cleared (2 x 256 x
    50257 fp32: 103 MB once every 32 steps) (truth: leak; an early warning
    is not expected: the runs it reads end at 16 iterations)."""
    kept = []
    yield from accumulating_lm_steps(
        batch, steps, lambda logits: kept.append(logits.detach().clone()),  # never cleared
        layers=4, sequence=256, window=32)


@case
def window32_leak_4g(batch, steps):
    """window32_leak, run under 4G (diagnosis_check.py) so that it runs out
    in half the steps: the corpus keeps this trace (the 6G one was 7.2 MB,
    and the device's copy of the tree holds 64 MiB)."""
    yield from window32_leak(batch, steps)


@case
def foreach_step(batch, steps):
    """Twelve linear layers of 4096 x 4096 fp32 (805 MB of weights), Adam
    with its default foreach update, under 4G: weights, gradients and both
    moments (3.0 GiB) fit, but the update's temporary (the moments' square
    roots, as large as the weights) does not: the first optimizer step runs
    out at any batch (truth: persistent: what the state and its update
    need; the update one tensor at a time, foreach=False, fits)."""
    yield from adam_on_linear_stack(batch, steps, foreach=None)


def adam_on_linear_stack(batch, steps, foreach):
    """Twelve linear layers of 4096 x 4096 fp32, Adam (foreach: None is
    PyTorch's default), a mean square loss on random inputs of `batch`."""
    m = linear_stack(4096, 12).cuda()
    opt = torch.optim.Adam(m.parameters(), lr=1e-4, foreach=foreach)
    xs = (torch.randn(batch, 4096, device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lambda model, x: model(x).square().mean())


# The nineteenth held-out set (session 19, 2026-12-04), written before it
# ran: the fix foreach_step's paragraph now names, tried; and tensors kept
# by a custom autograd Function.
@case
def foreach_off_fits(batch, steps):
    """foreach_step's job with foreach=False, under the same 4G, `steps`
    (20) (truth: none: the fix its paragraph names fits)."""
    yield from adam_on_linear_stack(batch, steps, foreach=False)


_CTX_KEPT = []


class KeepInput(torch.autograd.Function):
    """Identity whose backward scales by 2; it keeps its input in a module
    list for a debugging hook that was never removed."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        _CTX_KEPT.append(x)  # the bug: every step's input stays
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


@case
def ctx_leak(batch, steps):
    """ResNet-18 fp32 SGD with momentum, batch `batch` (64), 224x224, under
    6G, a custom autograd Function after layer2 that keeps its input (64 x
    128 x 28 x 28 fp32: 25.7 MB a step) in a module-level list (truth:
    leak, warned before the OOM)."""
    import torchvision
    m = torchvision.models.resnet18().cuda()
    m.layer2.register_forward_hook(lambda mod, inp, out: KeepInput.apply(out))
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    for x, y in image_batches(batch, steps):
        learn(torch.nn.functional.cross_entropy(m(x), y), opt)
        del x, y
        yield

# The twentieth held-out set (session 20, 2026-12-04), written and
# committed before any of it ran: LoRA on a frozen bf16 model with too
# large a first batch, a teacher model loaded in mid-training, and a job
# that empties PyTorch's cache after every step.


@case
def lora_batch(batch, steps):
    """LoRA fine-tuning without gradient checkpointing: the Llama-style
    model of lora_fits in bf16 (12 layers, hidden 2048, about 1.5 GB of
    weights), frozen, rank-16 adapters on its query and value projections,
    AdamW on the adapters only, sequence 512, under 5G: the batch is too
    large for its first step (truth: activations; gradients and optimizer
    state are tiny)."""
    yield from lora_llama_steps(batch, steps, 512, checkpointing=False)


@case
def teacher_late(batch, steps):
    """GPT-2 124M fp32 trains with AdamW at batch 2, sequence 128 (about
    2.6 GB at its peak, the foreach update's temporaries in it), and after
    6 steps the job loads a teacher for distillation, a GPT-2 of 24 layers
    of width 1536 (3.0 GB fp32) moved to the device with .cuda(), under a
    4G cap: the teacher's weights beside the student's weights and AdamW
    moments (1.5 GB) do not fit, in the middle of a run that was healthy
    (truth: persistent; nothing leaks, and no leak warning)."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        if step == 6:
            from transformers import GPT2Config, GPT2LMHeadModel
            teacher = GPT2LMHeadModel(GPT2Config(n_layer=24, n_embd=1536, n_head=16))
            teacher = teacher.eval().cuda()
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 128), device='cuda')), opt)
        yield


@case
def empty_cache_fits(batch, steps):
    """GPT-2 (6 layers) fp32 AdamW, batch 4, sequence 512, under 8G, that
    calls torch.cuda.empty_cache() and torch.cuda.reset_peak_memory_stats()
    after every step, as many training scripts do to print each step's peak:
    PyTorch's cache gives its segments back every step and takes them again
    (truth: none: no OOM paragraph, no leak warning)."""
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda')), opt)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        yield


def one_rank_group():
    """A process group of one rank (NCCL), as torchrun's single-GPU job has."""
    import torch.distributed as dist
    os.environ.setdefault('MASTER_ADDR', '127.0.0.1')
    os.environ.setdefault('MASTER_PORT', str(29500 + os.getpid() % 1000))
    dist.init_process_group('nccl', rank=0, world_size=1)
    return dist


def wrapped_lm_steps(wrap, layers, batch, steps, length):
    """GPT-2 of `layers` blocks, fp32, made and wrapped by wrap(model) on a
    process group of one rank, trained with AdamW at batch `batch` and
    sequence `length`, a yield a step; the group ended however it ends."""
    dist = one_rank_group()
    try:
        m = wrap(gpt2_model(n_layer=layers))
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        for _ in range(steps):
            learn(lm_loss(m, torch.randint(0, 50257, (batch, length), device='cuda')), opt)
            yield
    finally:
        dist.destroy_process_group()


def ddp(model):
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])


def fully_sharded(model):
    """FSDP's second API: fully_shard on each GPT-2 block, then the model."""
    from torch.distributed.fsdp import fully_shard
    for block in model.transformer.h:
        fully_shard(block)
    fully_shard(model)
    return model


@case
def ddp_batch(batch, steps):
    """GPT-2 124M fp32 wrapped in DistributedDataParallel (one rank, NCCL,
    gradient buckets of their own: another copy of the gradients' size),
    AdamW, sequence 1024, under 12G: too large a batch for its first step
    (truth: activations)."""
    yield from wrapped_lm_steps(ddp, 12, batch, steps, 1024)


# The twenty-first held-out set (session 20, 2026-12-04), committed before
# it ran: DDP over many steps (its buckets rebuilt before the second
# forward), and GPT-2's first step under FSDP, its first and second APIs.


@case
def ddp_fits(batch, steps):
    """GPT-2 (6 layers) fp32 in DistributedDataParallel (one rank, NCCL),
    AdamW, batch 4, sequence 512, under 8G, `steps` (20) steps: DDP's
    Reducer makes its gradient buckets at wrapping and rebuilds them once
    before the second forward (truth: none: no OOM paragraph, no leak
    warning)."""
    yield from wrapped_lm_steps(ddp, 6, batch, steps, 512)


@case
def fsdp_batch(batch, steps):
    """GPT-2 124M fp32 under FullyShardedDataParallel (the first API, one
    rank, NCCL: its flat parameters made from the moved weights, each GPT-2
    block wrapped on its own), AdamW, sequence 1024, under 12G: too large a
    batch for its first step (truth: activations)."""
    from torch.distributed.fsdp import FullyShardedDataParallel
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    def flat(model):
        return FullyShardedDataParallel(model, device_id=torch.cuda.current_device(),
                                        auto_wrap_policy=ModuleWrapPolicy({GPT2Block}))
    yield from wrapped_lm_steps(flat, 12, batch, steps, 1024)


@case
def fsdp2_batch(batch, steps):
    """fsdp_batch with FSDP's second API (fully_shard on each GPT-2 block,
    then on the model: parameters as DTensors sharded over one rank),
    AdamW, sequence 1024, under 12G: too large a batch for its first step
    (truth: activations)."""
    yield from wrapped_lm_steps(fully_sharded, 12, batch, steps, 1024)


# The twenty-second held-out set (session 20, 2026-12-04), committed before
# it ran: FSDP's second API over many steps, fitting and leaking.


@case
def fsdp2_fits(batch, steps):
    """GPT-2 (6 layers) fp32 under FSDP's second API (fully_shard, one
    rank), AdamW, batch 4, sequence 512, under 8G, `steps` (20) steps: each
    layer's weights gathered and freed in every forward and backward
    (truth: none: no OOM paragraph, no leak warning)."""
    yield from wrapped_lm_steps(fully_sharded, 6, batch, steps, 512)


@case
def fsdp2_leak(batch, steps):
    """fsdp2_fits's job (6 layers, batch `batch` (4), sequence 512), whose
    loop keeps every step's loss with its graph in a list for a plot (the
    saved activations of every step stay), under 8G (truth: leak, warned
    before the OOM)."""
    dist = one_rank_group()
    try:
        m = fully_sharded(gpt2_model(n_layer=6))
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        losses = []
        for _ in range(steps):
            loss = lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda'))
            loss.backward(retain_graph=True)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss)  # the bug: the graph stays with it
            yield
    finally:
        dist.destroy_process_group()


# The twenty-third held-out set (session 20, 2026-12-04), committed before
# it ran: jobs whose loop is a framework's, not the job's: Hugging Face's
# Trainer and PyTorch Lightning.


class RandomTokens(torch.utils.data.Dataset):
    """`count` sequences of random tokens on the CPU, as a tokenized dataset
    hands them to a framework's DataLoader."""

    def __init__(self, count, length, vocab=50257):
        self.count, self.length, self.vocab = count, length, vocab

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        ids = torch.randint(0, self.vocab, (self.length,))
        return {'input_ids': ids, 'labels': ids}


@case
def trainer_batch(batch, steps):
    """GPT-2 124M trained by Hugging Face's Trainer (bf16 autocast, its
    AdamW, per-device batch `batch`, sequence 1024, `steps` steps, no
    checkpoints or logging), under 12G: too large a batch for its first
    step (truth: activations)."""
    import tempfile
    from transformers import Trainer, TrainingArguments
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=batch,
                                 max_steps=steps, bf16=True, save_strategy='no',
                                 report_to='none', logging_strategy='no',
                                 dataloader_num_workers=0, disable_tqdm=True)
        Trainer(model=gpt2_model(), args=args,
                train_dataset=RandomTokens(batch * steps, 1024)).train()
    yield


@case
def lightning_leak(batch, steps):
    """GPT-2 (6 layers) fp32 in a PyTorch Lightning module, AdamW, batch 4,
    sequence 256, under 8G, whose training_step keeps each step's logits
    (with their grad_fn) in a list for an epoch-end metric: 206 MB a step
    (truth: leak, warned before the OOM)."""
    import lightning

    class Lm(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            from transformers import GPT2Config, GPT2LMHeadModel
            self.lm = GPT2LMHeadModel(GPT2Config(n_layer=6))
            self.kept = []

        def training_step(self, b, i):
            out = self.lm(input_ids=b['input_ids'], labels=b['labels'])
            self.kept.append(out.logits)  # the bug: every step's logits stay
            return out.loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    loader = torch.utils.data.DataLoader(RandomTokens(batch * steps, 256), batch_size=batch)
    lightning.Trainer(accelerator='gpu', devices=1, max_steps=steps, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False).fit(Lm(), loader)
    yield


# The twenty-fourth held-out set (session 21, 2026-12-04), written before
# any of it ran: an optimizer changed in mid-run whose state does not fit,
# a language model's inference at too large a batch, a head made per
# step's task name (weights that grow), and losses summed over micro-batches
# before one backward.


@case
def optim_switch_state(batch, steps):
    """GPT-2 124M fp32, batch `batch` (1), sequence 256, trained with plain
    SGD (no state) for 6 steps, then switched to AdamW for the second stage
    of its schedule, under 2.6G (2.0 GiB for the process beside its CUDA
    context): the SGD steps need about 1.5 GiB, and AdamW's first step
    makes its two moments (0.9 GiB) and the foreach update's temporaries
    beside the weights and gradients (0.9 GiB): it runs out in that step,
    after 6 healthy ones (truth: persistent, the optimizer's
    state; nothing leaks, and no leak warning)."""
    m = gpt2_model()
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    for step in range(steps):
        if step == 6:
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 256), device='cuda')), opt)
        yield


@case
def infer_lm_batch(batch, steps):
    """GPT-2 124M fp32 scoring text under torch.inference_mode (no
    backward), batch `batch` (64), sequence 1024, under 6G: each forward
    holds the key/value cache it returns and the logits (206 MB a sample),
    and the first batch does not fit (truth: activations; nothing to do
    with a leak or the weights, 0.5 GB)."""
    m = gpt2_model().eval()
    with torch.inference_mode():
        for _ in range(steps):
            x = torch.randint(0, 50257, (batch, 1024), device='cuda')
            out = m(input_ids=x)
            del out, x
            yield


@case
def task_heads_leak(batch, steps):
    """A GPT-2 body (6 layers) fp32 under 4G with one output head per
    task, 768 x 32768 (100 MB), made on first use and added to the AdamW
    optimizer; the task's name carries the step by mistake (f"task-{step //
    2}"), so a new head, its gradients and its two moments (400 MB) come
    every 2 steps and the old ones stay in the dict and the optimizer
    (truth: leak, in the weights and the optimizer's state; warned before
    the OOM)."""
    from transformers import GPT2Config, GPT2Model
    body = GPT2Model(GPT2Config(n_layer=6)).cuda()
    opt = torch.optim.AdamW(body.parameters(), lr=1e-4)
    heads = {}
    for step in range(steps):
        task = f'task-{step // 2}'  # the bug: meant to be the task's kind
        if task not in heads:
            heads[task] = torch.nn.Linear(768, 32768, bias=False).cuda()
            opt.add_param_group({'params': heads[task].parameters()})
        x = torch.randint(0, 50257, (batch, 256), device='cuda')
        y = torch.randint(0, 32768, (batch * 256,), device='cuda')
        logits = heads[task](body(input_ids=x).last_hidden_state).flatten(0, 1)
        learn(torch.nn.functional.cross_entropy(logits, y), opt)
        del logits, x, y
        yield


@case
def accum_sum_batch(batch, steps):
    """GPT-2 124M fp32, sequence 512, an effective batch of 32 made of 16
    micro-batches of `batch` (2) whose losses are summed before one
    backward, under 8G: every micro-batch's activations stay until that
    backward (about 0.5 GB a sample), so the first step runs out in its
    forwards (truth: activations; the fix is a backward per micro-batch)."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        total = 0
        for _ in range(16):
            total = total + lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda')) / 16
        learn(total, opt)
        del total
        yield


# The twenty-fifth held-out set (session 21, 2026-12-04), written before
# it ran: SGD with momentum, whose buffers are made inside its foreach
# update (not in an _init_group as Adam's moments are).


@case
def sgd_momentum_step(batch, steps):
    """A GPT-2 of 12 layers of width 1024 and a vocabulary of 8192 (about
    160 million parameters, 0.64 GB fp32) trained with SGD and momentum 0.9
    (PyTorch's foreach path), batch `batch` (1), sequence 128, under 2.15G
    (about 1.5 GiB for the process beside its CUDA context): weights,
    gradients and the step's activations fit (about 1.3 GiB), and the first
    optimizer step makes a momentum buffer as large as each parameter (0.6
    GiB more) inside its update: out in that step (truth: persistent, the
    optimizer's state; updating one tensor at a time makes the same
    buffers)."""
    m = gpt2_model(n_layer=12, n_embd=1024, n_head=16, vocab_size=8192)
    opt = torch.optim.SGD(m.parameters(), lr=1e-3, momentum=0.9)
    for _ in range(steps):
        learn(lm_loss(m, torch.randint(0, 8192, (batch, 128), device='cuda')), opt)
        yield


# The twenty-sixth held-out set (session 21, 2026-12-04), written before
# it ran: fp32 master weights a training loop keeps by hand beside a bf16
# model (state that no known call site names), and generation with a
# static key/value cache made whole before the first token.


@case
def master_weights_state(batch, steps):
    """GPT-2 124M in bf16 (0.25 GB) trained with fp32 master weights kept by
    the loop itself (`p.detach().float()`, 0.5 GB), each step's bf16
    gradients copied to the masters' .grad in fp32 (0.5 GB), AdamW over the
    masters, batch `batch` (1), sequence 256, under 2.8G (about 2.2 GiB for
    the process): the first forward and backward fit (about 1.8 GB), and
    AdamW's first step makes its moments for the fp32 masters (1.0 GB):
    out in that step (truth: persistent; the masters and their gradients
    are state made by the job's own lines)."""
    m = gpt2_model().to(torch.bfloat16)
    params = list(m.parameters())
    masters = [p.detach().float() for p in params]
    opt = torch.optim.AdamW(masters, lr=1e-4)
    for _ in range(steps):
        x = torch.randint(0, 50257, (batch, 256), device='cuda')
        lm_loss(m, x).backward()
        for p, q in zip(params, masters):
            q.grad = p.grad.float()
            p.grad = None
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for p, q in zip(params, masters):
                p.copy_(q)
        del x
        yield


@case
def static_cache_batch(batch, steps):
    """A Llama-style model (8 layers, hidden 1024, 8 key/value heads of
    128) in bf16 generating with transformers' static cache
    (`cache_implementation="static"`), batch `batch` (256), prompts of 512
    tokens, 512 new: the cache for every layer is made whole, at its
    largest length, before the first token (batch x 1024 x 8 layers x 2 x
    1024 x 2 bytes: 32 MiB a sequence), under 6G (truth: activations; the
    batch is the lever)."""
    from transformers import LlamaConfig
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                      num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8)
    m = hf_from_config(cfg, torch.bfloat16).cuda().eval()
    for _ in range(steps):
        x = torch.randint(0, 32000, (batch, 512), device='cuda')
        with torch.no_grad():
            m.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=512,
                       min_new_tokens=512, do_sample=False, cache_implementation='static')
        del x
        yield

# The twenty-seventh held-out set (session 22, 2026-12-04), written before
# it ran: an optimizer the training loop writes itself, an optimizer whose
# state is made whole when it is built, and a model family not tried yet
# (a 3D convolutional network on video clips), at too large a batch and
# over many steps.


@case
def handmade_adam_state(batch, steps):
    """GPT-2 124M fp32 (0.5 GB) trained by an Adam the loop writes itself:
    each parameter's two moments made with `torch.zeros_like` the first
    time it is updated, in the job's own lines (no torch.optim frame),
    gradients set to None after the whole update, batch `batch` (1),
    sequence 128, under 2.2G (about 1.55 GiB for the process): the first
    forward and backward fit (about 1.2 GiB), and weights, gradients and the
    two moments (1.85 GiB) do not: out while the moments are made (truth:
    persistent, optimizer state made by the job's own lines)."""
    m = gpt2_model()
    params = [p for p in m.parameters() if p.requires_grad]
    moments = {}
    for step in range(1, steps + 1):
        x = torch.randint(0, 50257, (batch, 128), device='cuda')
        lm_loss(m, x).backward()
        with torch.no_grad():
            for p in params:
                if p not in moments:
                    moments[p] = (torch.zeros_like(p), torch.zeros_like(p))
                mean, square = moments[p]
                mean.mul_(0.9).add_(p.grad, alpha=0.1)
                square.mul_(0.999).addcmul_(p.grad, p.grad, value=0.001)
                p.addcdiv_(mean / (1 - 0.9 ** step),
                           (square / (1 - 0.999 ** step)).sqrt_().add_(1e-8), value=-1e-4)
        m.zero_grad(set_to_none=True)
        del x
        yield


@case
def adagrad_state(batch, steps):
    """A GPT-2 of 24 layers of width 1024 (GPT-2 medium, 355 million
    parameters, 1.32 GiB fp32) trained with Adagrad, whose state (a sum of
    squares per parameter, 1.32 GiB) is made whole when the optimizer is
    built, batch `batch` (1), sequence 128, under 3.9G (about 3.3 GiB for
    the process): weights and state fit (2.64 GiB), and the first backward
    runs out making the gradients (another 1.32 GiB) (truth: persistent;
    no batch fits: weights, gradients and state alone exceed the cap)."""
    m = gpt2_model(n_layer=24, n_embd=1024, n_head=16)
    opt = torch.optim.Adagrad(m.parameters(), lr=1e-3)
    for _ in range(steps):
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 128), device='cuda')), opt)
        yield


def video_clips(batch, steps, classes=400):
    for _ in range(steps):
        yield (torch.randn(batch, 3, 16, 112, 112, device='cuda'),
               torch.randint(0, classes, (batch,), device='cuda'))


def video_model():
    import torchvision
    return torchvision.models.video.r3d_18(num_classes=400).cuda()


@case
def video_batch(batch, steps):
    """A 3D ResNet-18 (torchvision's r3d_18, 33 million parameters) for
    action recognition, clips of 16 frames of 112x112, fp32, SGD with
    momentum, batch `batch` (48) under 8G: the clips' activations (about
    a quarter of a GB each) do not fit the first step (truth:
    activations, bisected)."""
    m = video_model()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    yield from train_steps(m, opt, video_clips(batch, steps), class_loss)


@case
def video_fits(batch, steps):
    """video_batch's job at batch `batch` (8) under 8G for many steps: it
    fits (truth: none; no leak warning)."""
    yield from video_batch(batch, steps)


@case
def bptt_leak(batch, steps):
    """Truncated backpropagation through time gone wrong: the LstmLm reads
    a token stream in chunks of 64 at batch `batch` (32), carries its
    (h, c) state into the next chunk without detach, and calls
    `backward(retain_graph=True)` (what silences "backward through the
    graph a second time"), stepping SGD only every 100 chunks: every
    chunk's graph, its cuDNN reserve and saved logits, stays linked to the
    next, under 4G (truth: leak)."""
    m = LstmLm().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    state = None
    for chunk in range(steps):
        x = torch.randint(0, 10000, (batch, 64), device='cuda')
        hidden, state = m.rnn(m.emb(x), state)  # the bug: state not detached
        logits = m.head(hidden)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten())
        loss.backward(retain_graph=True)
        if chunk % 100 == 99:
            opt.step()
            opt.zero_grad(set_to_none=True)
        del hidden, logits, loss
        yield


@case
def fused_adamw_state(batch, steps):
    """GPT-2 medium's shape (24 layers of width 1024, 355 million
    parameters, 1.42 GB fp32) trained with AdamW(fused=True), batch
    `batch` (1), sequence 128, under 4.6G (about 4 GB for the process):
    weights, gradients and a short sequence's activations fit, Adam's two
    moments (2.84 GB) on top do not: out in the first optimizer step
    (truth: persistent; no batch fits)."""
    m = gpt2_model(n_layer=24, n_embd=1024, n_head=16)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    for _ in range(steps):
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 128), device='cuda')), opt)
        yield


@case
def mobilenet_amp_batch(batch, steps):
    """torchvision's MobileNetV3-Large (5.5 million parameters: inverted
    residuals, depthwise convolutions, squeeze-excitation), channels-last,
    fp16 autocast with a GradScaler, SGD with Nesterov momentum, 224x224,
    batch `batch` (512) under 6G: the expanded depthwise activations of that
    batch do not fit the first step (truth: activations, bisected)."""
    import torchvision
    m = torchvision.models.mobilenet_v3_large().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    scaler = torch.amp.GradScaler('cuda')
    for x, y in image_batches(batch, steps):
        with torch.autocast('cuda', dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(
                m(x.contiguous(memory_format=torch.channels_last)), y)
        scaled_learn(loss, opt, scaler)
        del loss
        yield


@case
def gpt2_bf16_batch(batch, steps):
    """GPT-2 124M with fp32 weights under bf16 autocast, fused AdamW,
    sequence 512, batch `batch` (64) under 16G: the first step's
    activations, half of them bf16, do not fit (truth: activations,
    bisected)."""
    m = gpt2_model()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
    for _ in range(steps):
        x = torch.randint(0, 50257, (batch, 512), device='cuda')
        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = lm_loss(m, x)
        learn(loss, opt)
        del loss
        yield


@case
def swa_fits(batch, steps):
    """Stochastic weight averaging: GPT-2 (6 layers) fp32 AdamW, batch
    `batch` (4), sequence 512, under 8G, `steps` (30); at step 10 an
    `AveragedModel` (a deep copy of the weights, 0.33 GB) is made and
    updated every step after. Memory rises once in mid-run and stays
    (truth: none, and no leak warning)."""
    from torch.optim.swa_utils import AveragedModel
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    average = None
    for step in range(steps):
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 512), device='cuda')), opt)
        if step == 10:
            average = AveragedModel(m)
        elif average is not None:
            average.update_parameters(m)
        yield


@case
def whisper_batch(batch, steps):
    """A speech encoder-decoder of another family: Whisper's shape at its
    small size from transformers' config (12 encoder and 12 decoder layers
    of width 768, about 240 million parameters), fp32 AdamW, 30 s of log-mel
    features (80 x 3000) and 128 target tokens a sample, batch `batch` (32)
    under 12G: the first step's activations do not fit (truth:
    activations, bisected)."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    cfg = WhisperConfig(vocab_size=51865, d_model=768, encoder_layers=12, decoder_layers=12,
                        encoder_attention_heads=12, decoder_attention_heads=12,
                        encoder_ffn_dim=3072, decoder_ffn_dim=3072, num_mel_bins=80,
                        max_source_positions=1500, max_target_positions=448)
    m = WhisperForConditionalGeneration(cfg).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        features = torch.randn(batch, 80, 3000, device='cuda')
        labels = torch.randint(0, 51865, (batch, 128), device='cuda')
        learn(m(input_features=features, labels=labels).loss, opt)
        yield


@case
def peft_lora_leak(batch, steps):
    """PEFT's LoRA (rank 8 on GPT-2's fused attention projection, its
    `c_attn`; the rest frozen) on GPT-2 124M fp32, AdamW on the adapters,
    batch `batch` (2), sequence 256, under 6G; the loop keeps each step's
    last-position logits for a later metric, `logits[:, -1]`, without
    detach: the view holds its whole base (2 x 256 x 50257 fp32, 103 MB)
    and its graph every step (truth: leak)."""
    from peft import LoraConfig, get_peft_model
    m = get_peft_model(gpt2_model(), LoraConfig(r=8, lora_alpha=16, target_modules=['c_attn'],
                                                fan_in_fan_out=True))
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4)
    kept = []
    for _ in range(steps):
        x = torch.randint(0, 50257, (batch, 256), device='cuda')
        out = m(input_ids=x, labels=x)
        out.loss.backward(retain_graph=True)
        opt.step()
        opt.zero_grad(set_to_none=True)
        kept.append(out.logits[:, -1])  # the bug: a view of the logits, with its graph
        del out
        yield


@case
def timm_effnet_batch(batch, steps):
    """timm's EfficientNet-B3 (12 million parameters; timm's own blocks,
    drop path, SiLU), fp32 AdamW, 256x256 images, batch `batch` (256)
    under 8G: the first step's activations do not fit (truth: activations,
    bisected)."""
    import timm
    m = timm.create_model('efficientnet_b3', pretrained=False, num_classes=1000,
                          drop_path_rate=0.2).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    yield from train_steps(m, opt, image_batches(batch, steps, size=256), class_loss)


class TinyDiffusionUnet(torch.nn.Module):
    """A denoising UNet in the shape diffusion models use: residual blocks
    with GroupNorm and SiLU at three resolutions (128, 256, 512 channels),
    the timestep's embedding added in each block, self-attention at the
    lowest resolution, skip connections by concatenation."""

    class Block(torch.nn.Module):
        def __init__(self, cin, cout, tdim):
            super().__init__()
            self.n1, self.c1 = torch.nn.GroupNorm(32, cin), torch.nn.Conv2d(cin, cout, 3, padding=1)
            self.t = torch.nn.Linear(tdim, cout)
            self.n2, self.c2 = torch.nn.GroupNorm(32, cout), torch.nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = torch.nn.Conv2d(cin, cout, 1) if cin != cout else torch.nn.Identity()

        def forward(self, x, t):
            h = self.c1(torch.nn.functional.silu(self.n1(x))) + self.t(t)[:, :, None, None]
            h = self.c2(torch.nn.functional.silu(self.n2(h)))
            return h + self.skip(x)

    def __init__(self, widths=(128, 256, 512), tdim=512):
        super().__init__()
        self.temb = torch.nn.Sequential(torch.nn.Linear(1, tdim), torch.nn.SiLU(),
                                        torch.nn.Linear(tdim, tdim))
        self.inp = torch.nn.Conv2d(3, widths[0], 3, padding=1)
        self.down, c = torch.nn.ModuleList(), widths[0]
        for w in widths:
            self.down.append(self.Block(c, w, tdim))
            c = w
        self.attn = torch.nn.MultiheadAttention(c, 8, batch_first=True)
        self.up = torch.nn.ModuleList()
        for w in reversed(widths):
            self.up.append(self.Block(c + w, w, tdim))
            c = w
        self.out = torch.nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x, t):
        t = self.temb(t[:, None])
        h, skips = self.inp(x), []
        for i, block in enumerate(self.down):
            h = block(h, t)
            skips.append(h)
            if i < len(self.down) - 1:
                h = torch.nn.functional.avg_pool2d(h, 2)
        b, c, hh, ww = h.shape
        seq = h.flatten(2).transpose(1, 2)
        h = h + self.attn(seq, seq, seq, need_weights=False)[0].transpose(1, 2).reshape(b, c, hh, ww)
        for i, block in enumerate(self.up):
            skip = skips.pop()
            if h.shape[-1] != skip.shape[-1]:
                h = torch.nn.functional.interpolate(h, size=skip.shape[-2:], mode='nearest')
            h = block(torch.cat([h, skip], 1), t)
        return self.out(h)


@case
def diffusion_batch(batch, steps):
    """A diffusion model's training step: TinyDiffusionUnet (about 18
    million parameters) predicting the noise added to 128x128 images at a
    random timestep, MSE loss, bf16 autocast, AdamW, with an exponential
    moving average of the weights (a copy updated every step), batch
    `batch` (128) under 8G: the first step's activations do not fit (truth:
    activations, bisected)."""
    import copy
    m = TinyDiffusionUnet().cuda()
    ema = copy.deepcopy(m).requires_grad_(False)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for _ in range(steps):
        x = torch.randn(batch, 3, 128, 128, device='cuda')
        t = torch.rand(batch, device='cuda')
        noise = torch.randn_like(x)
        noisy = (1 - t)[:, None, None, None] * x + t[:, None, None, None] * noise
        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(m(noisy, t).float(), noise)
        learn(loss, opt)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), m.parameters()):
                e.lerp_(p, 0.001)
        del loss
        yield


@case
def accelerate_accum_fits(batch, steps):
    """Hugging Face accelerate's loop: `Accelerator(gradient_accumulation_steps=4,
    mixed_precision='bf16')`, GPT-2 (6 layers) fp32 weights, AdamW prepared
    by it, batch `batch` (4), sequence 512, `steps` (24) micro-steps under
    8G, `accelerator.accumulate` and `accelerator.backward`: it fits (truth:
    none, and no leak warning)."""
    from accelerate import Accelerator
    acc = Accelerator(gradient_accumulation_steps=4, mixed_precision='bf16')
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    m, opt = acc.prepare(m, opt)
    for _ in range(steps):
        x = torch.randint(0, 50257, (batch, 512), device='cuda')
        with acc.accumulate(m):
            acc.backward(m(input_ids=x, labels=x).loss)
            opt.step()
            opt.zero_grad(set_to_none=True)
        yield


# Known families at other shapes and scales (the thirtieth held-out set):
# the batch figure's arithmetic on sequences, images and sizes the corpus
# has not seen.


@case
def bert_seq128_batch(batch, steps):
    """bert_batch's model (BERT-base, masked LM, fp32 AdamW) at sequence
    128 instead of 512, batch `batch` (1024) under 4G: too large for the
    first step (truth: activations, bisected)."""
    yield from train_steps(*bert_mlm(batch, steps, 128), lm_loss)


@case
def resnet_small_batch(batch, steps):
    """resnet_batch's model (ResNet-50, fp32, SGD with momentum) on 128x128
    images instead of 224x224, batch `batch` (512) under 3G: too large for
    the first step (truth: activations, bisected)."""
    import torchvision
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    yield from train_steps(m, opt, image_batches(batch, steps, size=128), class_loss)


@case
def vit_bf16_batch(batch, steps):
    """vit_batch's model (torchvision ViT-B/16, AdamW) under bf16 autocast,
    224x224, batch `batch` (512) under 12G: too large for the first step
    (truth: activations, bisected)."""
    import torchvision
    m = torchvision.models.vit_b_16().cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for x, y in image_batches(batch, steps):
        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(m(x).float(), y)
        learn(loss, opt)
        del loss
        yield


@case
def gpt2_medium_batch(batch, steps):
    """GPT-2 medium's shape (24 layers of width 1024, 355 million
    parameters), fp32 AdamW, sequence 512, batch `batch` (16) under 16G:
    too large for the first step (truth: activations, bisected)."""
    m = gpt2_model(n_layer=24, n_embd=1024, n_head=16)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    xs = (torch.randint(0, 50257, (batch, 512), device='cuda') for _ in range(steps))
    yield from train_steps(m, opt, xs, lm_loss)


# Leaks that run the job out two or three steps after they begin (the
# thirty-first held-out set, session 26): what a call site made in earlier
# iterations and still holds, read at the OOM (docs/diagnosis.md, "On
# smaller devices"); replayed offline, such leaks given to the corpus's
# fitted jobs were `activations` before.


def kept_logits_steps(batch, steps, window):
    """accumulating_lm_steps (GPT-2, 6 layers, sequence 512) whose
    micro-steps' logits (batch x 512 x 50257 fp32: 412 MB at 4) are kept,
    detached, from the 4th micro-step on, in a list for metrics computed
    later."""
    kept = []

    def keep(step, logits):
        if step >= 3:
            kept.append(logits.detach())  # the bug: never cleared
    yield from accumulating_lm_steps(batch, steps, lambda logits: None, window=window,
                                     micro_step=keep)


@case
def fast_logits_leak(batch, steps):
    """GPT-2 (6 layers) fp32 AdamW, batch `batch` (4), sequence 512; from
    the 4th step on each step's logits (412 MB) are kept, detached, in a
    list for metrics computed later (kept_logits_steps), under 5.3G, where
    the job without them peaks near 4.3 GB with its context: out at about
    the third kept (truth: leak; no warning asked of two or three rises)."""
    yield from kept_logits_steps(batch, steps, 1)


@case
def accum_fast_leak(batch, steps):
    """fast_logits_leak's job under gradient accumulation over 4
    micro-steps (the gradients kept between them, set to None after each
    optimizer step), each micro-step's logits kept from the 4th on, under
    5.6G: out at about the third kept, the iterations' lowest points moving
    with the window (truth: leak; no warning asked)."""
    yield from kept_logits_steps(batch, steps, 4)


# A leak that has kept one block when it runs the job out (the
# thirty-second held-out set, session 27): the rule reads a site's blocks
# of one age made mid-run as a leak's only where the failed iteration asks
# no more than earlier ones (docs/diagnosis.md, "On smaller devices").


@case
def kept_validation_leak(batch, steps):
    """GPT-2 (6 layers) fp32 AdamW, batch `batch` (4), training sequences of
    512 and 256 tokens in turn; after the 5th step and every 8th after it,
    a validation batch of 4 x 1024 tokens is scored under no_grad and its
    logits (823 MB) appended to a list for calibration metrics computed at
    the end (the bug). Under 4.4G, where the job without them peaks near
    3.34 GiB of tensors plus its context: the 256-token step after the
    first validation fits, the 512-token step after it runs out, before a
    second is kept (truth: leak; one block kept, made two iterations before
    the failed one, which asks no more than the earlier 512-token steps)."""
    m = gpt2_model(n_layer=6)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    kept = []
    for step in range(steps):
        length = 512 if step % 2 == 0 else 256
        learn(lm_loss(m, torch.randint(0, 50257, (batch, length), device='cuda')), opt)
        if step % 8 == 4:
            with torch.no_grad():
                v = torch.randint(0, 50257, (4, 1024), device='cuda')
                kept.append(m(input_ids=v).logits)  # the bug: kept on the device
        yield


# A tensor kept in the very step that runs out (the thirty-third held-out
# set, session 28): no lowest point passes between, so the step is read
# against the one before at the same point (src/core/recent.c;
# docs/diagnosis.md, "On smaller devices").


@case
def step_logits_leak(batch, steps):
    """ddp_fits's job (GPT-2, 6 layers, fp32, DDP on one rank, AdamW, batch
    `batch` (4), sequence 512) whose 10th step keeps its logits (412 MB) in
    a list for a sample table (the bug), where every other step frees them
    once its loss is computed. Under 5.0G: its second step (DDP rebuilds
    its buckets) reserved 4.26 GB under --manage for 3.91 GB of tensors
    beside 0.78 GiB held outside the pool (its first builds, under 4.5G
    and 4.75G, ran out there on an H100); the 10th step's backward runs
    out with the logits still held (truth: leak; one tensor kept, in the
    step that runs out)."""
    dist = one_rank_group()
    kept = []
    try:
        m = ddp(gpt2_model(n_layer=6))
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        for step in range(steps):
            x = torch.randint(0, 50257, (batch, 512), device='cuda')
            out = m(input_ids=x, labels=x)
            loss = out.loss
            if step == 9:
                kept.append(out.logits)  # the bug: kept on the device
            del out
            learn(loss, opt)
            del loss
            yield
    finally:
        dist.destroy_process_group()



def one_kept_logits_steps(m, vocab, batch, steps, keep_at, seed, lengths, fixed):
    """A language model's training (fp32 AdamW, batch `batch`) whose length
    is drawn per step from `lengths` (seeded) but where `fixed` says;
    the step keep_at (None: none) keeps its logits."""
    import random
    rng = random.Random(seed)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    kept = []
    for step in range(steps):
        length = fixed.get(step) or rng.randrange(*lengths)
        x = torch.randint(0, vocab, (batch, length), device='cuda')
        out = m(input_ids=x, labels=x)
        loss = out.loss
        if step == keep_at:
            kept.append(out.logits.detach())  # the bug: a table of samples' logits, on the device
        del out, x
        learn(loss, opt)
        del loss
        yield


def varlen_logits_steps(batch, steps, keep_at):
    """GPT-2 (6 layers), each step's length drawn from 128 to 384, step 6's
    384 and step 13's 512 (a long document)."""
    yield from one_kept_logits_steps(gpt2_model(n_layer=6), 50257, batch, steps, keep_at, 53,
                                 (128, 385), {6: 384, 13: 512})


@case
def varlen_logits_fits(batch, steps):
    """varlen_logits_leak's job with nothing kept: its cap is set from this
    job's peak (truth: none)."""
    yield from varlen_logits_steps(batch, steps, None)


@case
def varlen_logits_leak(batch, steps):
    """A job whose lengths vary step to step (GPT-2, 6 layers, fp32 AdamW,
    batch 8, 128-384 tokens, seeded) keeps step 6's logits (batch x 384 x
    50257 fp32, 618 MB at batch 8) for a sample table, detached but on the
    device; every other step frees them with its loss. Its cap lies between
    varlen_logits_fits's peak (step 13's 512 tokens) and that peak plus the
    kept logits, so the job runs out in step 13, the longest, which alone
    would fit (truth: leak; one block of a per-step site kept, out at a
    later, larger step)."""
    yield from varlen_logits_steps(batch, steps, 6)


def mlm_logits_steps(batch, steps, keep_at):
    """BERT (6 layers) masked LM, each step's length drawn from 64 to 256,
    step 6's 256 and step 13's 512."""
    from transformers import BertConfig, BertForMaskedLM
    m = BertForMaskedLM(BertConfig(num_hidden_layers=6)).cuda()
    yield from one_kept_logits_steps(m, 30522, batch, steps, keep_at, 59, (64, 257),
                                 {6: 256, 13: 512})


@case
def mlm_logits_fits(batch, steps):
    """mlm_logits_leak's job with nothing kept: its cap is set from this
    job's peak (truth: none)."""
    yield from mlm_logits_steps(batch, steps, None)


@case
def mlm_logits_leak(batch, steps):
    """An encoder's masked-LM training whose lengths vary step to step
    (BERT, 6 layers, fp32 AdamW, batch 16, 64-256 tokens, seeded) keeps
    step 6's prediction logits (batch x 256 x 30522 fp32, 500 MB at batch
    16) for an error analysis, detached but on the device. Its cap lies
    between mlm_logits_fits's peak (step 13's 512 tokens) and that peak
    plus the kept logits (truth: leak; one block of a per-step site kept,
    out at a later, larger step)."""
    yield from mlm_logits_steps(batch, steps, 6)


def seg_pred_steps(batch, steps, keep_at):
    """Semantic segmentation at sizes drawn per step (multi-scale training:
    torchvision FCN-ResNet50, output stride 8, 150 classes, fp32 SGD with
    momentum, batch `batch`), 256-448 pixels square (seeded, multiples of
    64), step 6's 448 and step 13's 576; the step keep_at (None: none)
    keeps its predicted map."""
    import random
    import torchvision
    rng = random.Random(61)
    m = torchvision.models.segmentation.fcn_resnet50(
        weights=None, weights_backbone=None, num_classes=150, aux_loss=False).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    shown = []
    for step in range(steps):
        size = {6: 448, 13: 576}.get(step) or rng.choice((256, 320, 384, 448))
        x = torch.randn(batch, 3, size, size, device='cuda')
        y = torch.randint(0, 150, (batch, size, size), device='cuda')
        out = m(x)['out']
        loss = torch.nn.functional.cross_entropy(out, y)
        if step == keep_at:
            shown.append(out.detach())  # the bug: a map kept to draw later, on the device
        del out, x, y
        learn(loss, opt)
        del loss
        yield


@case
def seg_pred_fits(batch, steps):
    """seg_pred_leak's job with nothing kept: its cap is set from this
    job's peak (truth: none)."""
    yield from seg_pred_steps(batch, steps, None)


@case
def seg_pred_leak(batch, steps):
    """Multi-scale segmentation training (FCN-ResNet50, 150 classes, fp32
    SGD, batch 8, 256-448 pixels, seeded) keeps step 6's predicted map
    (8 x 150 x 448 x 448 fp32, 963 MB) to draw later, detached but on the
    device. Its cap lies between seg_pred_fits's peak (step 13's 576
    pixels) and that peak plus the kept map (truth: leak; one block of a
    per-step site kept, out at a later, larger step)."""
    yield from seg_pred_steps(batch, steps, 6)


# The thirty-sixth held-out set (session 31, 2026-12-05), committed before
# it ran: state made in mid-run on models the corpus's such cases are not
# (a CNN student loading a ViT teacher, a ViT switched from SGD to AdamW),
# and controls that run out mid-run of a larger input's memory (an
# unrolled GRU's longer sequences, a ViT's larger last batch, a CNN's
# evaluation at a large batch), to be read with and without call sites
# (OOMLENS_ROLES=0): the rule for state made past a repeat of the last
# step must take the first two and leave the others' `activations`.


@case
def cnn_teacher_late(batch, steps):
    """ResNet-18 fp32 student, SGD with momentum, batch `batch` (4), 224
    pixels; after 6 steps the job loads a ViT-L/16 teacher (304 million
    parameters, 1.22 GB fp32) with .eval().cuda() to distil from it. Its cap
    lies midway between the student's own peak (steps=6) and that plus the
    teacher's weights: the teacher beside the student's state does not fit,
    in the middle of a healthy run (truth: persistent)."""
    import torchvision
    m = torchvision.models.resnet18().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    teacher = None
    for step in range(steps):
        if step == 6:
            teacher = torchvision.models.vit_l_16().eval().cuda()
        x, y = next(image_batches(batch, 1))
        loss = torch.nn.functional.cross_entropy(m(x), y)
        if teacher is not None:
            with torch.no_grad():
                soft = teacher(x).softmax(-1)
            loss = loss + torch.nn.functional.cross_entropy(m(x), soft)
        learn(loss, opt)
        del loss, x, y
        yield


@case
def vit_switch_state(batch, steps):
    """ViT-B/16 fp32 (86.6 million parameters, 346 MB), batch `batch` (4),
    trained with plain SGD (no state) for 6 steps, then with AdamW for its
    schedule's second stage: AdamW's first step makes two moments as large
    as the weights (692 MB) beside the weights and gradients. Its cap lies
    midway between the SGD steps' peak (steps=6) and the AdamW step's
    (steps=8), where the weights, gradients and moments alone pass what the
    process can have (truth: persistent)."""
    import torchvision
    m = torchvision.models.vit_b_16().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for step in range(steps):
        if step == 6:
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        learn(class_loss(m, next(image_batches(batch, 1))), opt)
        yield


@case
def gru_longer_late(batch, steps):
    """An unrolled GRU language model (GRUCell per token, hidden 1024),
    batch `batch` (16), Adam, sequences of 64 tokens for 8 steps, then of
    320 (a length bucket that comes late): each longer step makes more of
    the same tensors than the short ones made. Its cap lies midway between
    the short steps' peak (steps=8) and the long step's (steps=10); nothing
    is kept (truth: activations)."""
    m = UnrolledGru().cuda()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    for step in range(steps):
        x = torch.randint(0, 8000, (batch, 64 if step < 8 else 320), device='cuda')
        logits = m(x)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten())
        learn(loss, opt)
        del loss, logits, x
        yield


@case
def vit_batch_late(batch, steps):
    """ViT-B/16 fp32, AdamW, batch `batch` (8) for 8 steps, then 6 times
    that (a sampler's last bucket): the larger batch's activations do not
    fit under a cap midway between the small steps' peak (steps=8) and the
    large one's (steps=10); nothing is kept (truth: activations)."""
    import torchvision
    m = torchvision.models.vit_b_16().cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        n = batch if step < 8 else 6 * batch
        learn(class_loss(m, next(image_batches(n, 1))), opt)
        yield


@case
def cnn_eval_late(batch, steps):
    """ResNet-50 fp32, SGD with momentum, batch `batch` (32), 224 pixels;
    at step 8, after its training step, an evaluation pass under
    torch.no_grad() at 24 times the batch (768 images at once): its
    activations do not fit under a cap midway between the training steps'
    peak (steps=8) and the evaluation's (steps=10); nothing is kept (truth:
    activations, a new pass's; `undetermined` without call sites is allowed:
    the pass is work the steps before never did)."""
    import torchvision
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    for step in range(steps):
        learn(class_loss(m, next(image_batches(batch, 1))), opt)
        if step == 8:
            m.eval()
            with torch.no_grad():
                x, _ = next(image_batches(24 * batch, 1))
                m(x).argmax(-1).sum().item()
                del x
            m.train()
        yield



# The thirty-seventh held-out set (session 31, 2026-12-05), committed
# before it ran: transformers whose sequences grow four times late (their
# attention's tensors grow with the square of the length, the rest with
# the length: no one factor), and a weight average made in mid-run, for
# the rule of more past a repeat without call sites.


def longer_late_steps(m, vocab, batch, steps, short):
    """A language model's steps, fp32 AdamW: sequences of `short` tokens
    for 8 steps, then four times as long."""
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        n = short if step < 8 else 4 * short
        learn(lm_loss(m, torch.randint(0, vocab, (batch, n), device='cuda')), opt)
        yield


@case
def bert_longer_late(batch, steps):
    """BERT-base masked LM (transformers, eager attention), fp32 AdamW,
    batch `batch` (8), sequences of 128 tokens for 8 steps, then of 512 (a
    length bucket that comes late). Its cap lies midway between the short
    steps' peak (steps=8) and the long step's (steps=10); nothing is kept
    (truth: activations)."""
    from transformers import BertConfig, BertForMaskedLM
    m = BertForMaskedLM(BertConfig(attn_implementation='eager')).cuda()
    yield from longer_late_steps(m, 30522, batch, steps, 128)


@case
def gpt2_longer_late(batch, steps):
    """GPT-2 124M (eager attention), fp32 AdamW, batch `batch` (4),
    sequences of 256 tokens for 8 steps, then of 1024. Its cap lies
    midway between the short steps' peak (steps=8) and the long step's
    (steps=10); nothing is kept (truth: activations)."""
    yield from longer_late_steps(gpt2_model(attn_implementation='eager'), 50257, batch, steps,
                                 256)


@case
def gpt2_ema_late(batch, steps):
    """GPT-2 (24 layers of width 1024, 355 million parameters, 1.42 GB
    fp32) trained with plain SGD, batch `batch` (1), sequence 128; after 6
    steps the job starts an exponential moving average of the weights, a
    deep copy of the model on the device, updated after each step. Its cap
    lies midway between the steps' peak (steps=6) and that plus the copy:
    the copy beside the weights and gradients does not fit (truth:
    persistent)."""
    import copy
    m = gpt2_model(n_layer=24, n_embd=1024, n_head=16)
    opt = torch.optim.SGD(m.parameters(), lr=1e-4)
    ema = None
    for step in range(steps):
        if step == 6:
            ema = copy.deepcopy(m).requires_grad_(False)
        learn(lm_loss(m, torch.randint(0, 50257, (batch, 128), device='cuda')), opt)
        if ema is not None:
            with torch.no_grad():
                for average, p in zip(ema.parameters(), m.parameters()):
                    average.lerp_(p, 0.001)
        yield


# The thirty-eighth held-out set (session 32, 2026-12-06), committed before
# it ran: jobs that catch their out-of-memory errors and go on, so that one
# process sees several OOMs and then fits: a batch size search as Hugging
# Face's auto_find_batch_size does it (accelerate's
# find_executable_batch_size), and long batches skipped as fairseq's
# trainer skips them. Each OOM must get its one paragraph and a class true
# of it, no leak may be warned of, and the report must not give figures in
# units of a batch the job no longer runs.


def oom_caught(e):
    """Whether a RuntimeError is the job running out: torch.OutOfMemoryError,
    or under --manage (PyTorch's cache off) the AcceleratorError "CUDA
    error: out of memory" of its uncached path."""
    return isinstance(e, torch.OutOfMemoryError) or 'out of memory' in str(e)


def free_after_oom():
    """What the batch size searches do before they try again."""
    import gc
    gc.collect()
    torch.cuda.empty_cache()


@case
def auto_batch_fits(batch, steps):
    """GPT-2 124M fp32 AdamW, sequence 1024, under 12G, behind a batch size
    search as accelerate's find_executable_batch_size does it: from `batch`
    (16), an OOM halves the batch, and the model and optimizer are made
    again after gc.collect() and torch.cuda.empty_cache(). 16 and 8 run out
    in their first step; 4 fits (5 does: the corpus's gpt2_batch, bisected
    under 12G) and trains `steps` steps (truth: two OOMs the job recovers
    from, each a first step's activations; then it fits, no leak)."""
    b = batch
    while b >= 1:
        ran_out = False
        try:
            m = gpt2_model()
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
            for _ in range(steps):
                learn(lm_loss(m, torch.randint(0, 50257, (b, 1024), device='cuda')), opt)
                yield
            return
        except RuntimeError as e:
            if not oom_caught(e):
                raise
            print(f'auto_batch_fits: batch {b} ran out; trying {b // 2}', flush=True)
            ran_out = True
        if ran_out:  # out of the except block: its traceback's frames are gone
            m = opt = None
            free_after_oom()
            b //= 2


@case
def skip_long_fits(batch, steps):
    """GPT-2 (6 layers, 2048 positions) fp32 AdamW, batch `batch` (8),
    lengths drawn from 128 to 384 (seeded), every 7th step a batch of 2048
    tokens, under 6G: the long batch's activations do not fit. The trainer
    catches the OOM, drops that batch (gradients set to None, gc.collect(),
    torch.cuda.empty_cache()) and goes on, as fairseq's trainer does, for
    `steps` (30) steps (truth: each OOM the activations of a larger input,
    in mid-run; nothing is kept, no leak)."""
    import random
    rng = random.Random(5)
    m = gpt2_model(n_layer=6, n_positions=2048)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    for step in range(steps):
        n = 2048 if step % 7 == 6 else rng.randint(128, 384)
        ran_out = False
        try:
            learn(lm_loss(m, torch.randint(0, 50257, (batch, n), device='cuda')), opt)
        except RuntimeError as e:
            if not oom_caught(e):
                raise
            print(f'skip_long_fits: step {step} ({n} tokens) ran out; skipped', flush=True)
            ran_out = True
        if ran_out:
            opt.zero_grad(set_to_none=True)
            free_after_oom()
        yield


def worker_pool_steps(model_of, batch, steps, workers=4, seed=61):
    """A server's worker pool: `workers` Python threads, each on a CUDA
    stream of its own, run one inference each a step on inputs of `batch`
    seeded per worker and step; each output is checked against the same
    forward run beforehand on the main thread's stream (a block the
    allocator gave two threads at once would show here). The threads are
    the pool's for the whole run, bound to the device by their first call."""
    from concurrent.futures import ThreadPoolExecutor
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    m = model_of()
    streams = [torch.cuda.Stream() for _ in range(workers)]

    def inputs(worker, step):
        g = torch.Generator(device='cuda').manual_seed(seed + 1000 * step + worker)
        return torch.randn(batch, 3, 224, 224, device='cuda', generator=g)

    def forward(worker, step):
        with torch.cuda.stream(streams[worker]), torch.inference_mode():
            y = m(inputs(worker, step)).float()
            total = y.sum(dtype=torch.float64).item()  # synchronizes its stream
            del y
            return total

    expected = {}
    with torch.inference_mode():
        for step in range(steps):
            for w in range(workers):
                expected[w, step] = m(inputs(w, step)).float().sum(dtype=torch.float64).item()
    torch.cuda.synchronize()
    with ThreadPoolExecutor(max_workers=workers) as ex:
        for step in range(steps):
            got = list(ex.map(lambda w: forward(w, step), range(workers)))
            for w, total in enumerate(got):
                want = expected[w, step]
                if abs(total - want) > 1e-4 * max(1.0, abs(want)):
                    raise AssertionError(f'worker {w} step {step}: output sum {total!r}, '
                                         f'{want!r} on the main thread')
            yield


@case
def threaded_infer_fits(batch, steps):
    """ResNet-18 inference (eval) served by 4 worker threads, each on its
    own CUDA stream, batch `batch` (32) each, under 4G; every output is
    checked against the same forward on the main thread (truth: no
    out-of-memory; the job fails if an output differs)."""
    import torchvision
    yield from worker_pool_steps(lambda: torchvision.models.resnet18().cuda().eval(),
                                 batch, steps)


@case
def threaded_infer_batch(batch, steps):
    """ResNet-50 inference served by 4 worker threads on streams of their
    own at batch `batch` (512) each, under 8G: the reference forward on the
    main thread fits (one forward at a time), the four at once do not
    (truth: activations: four concurrent forwards' own memory; the cap is
    what the threads share, so a smaller batch per worker, or fewer
    workers, is the fix)."""
    import torchvision
    yield from worker_pool_steps(lambda: torchvision.models.resnet50().cuda().eval(),
                                 batch, steps)


def train_in_thread(steps_of):
    """Runs a training loop in a threading.Thread of its own (as a
    notebook's or a framework's worker launches it), handing each finished
    step to the main thread, which yields it; an error in the thread is
    raised on the main thread."""
    import queue, threading
    done = queue.Queue(maxsize=1)

    def body():
        try:
            for _ in steps_of():
                torch.cuda.synchronize()
                done.put(('step', None))
            done.put(('end', None))
        except BaseException as e:  # handed over, raised where main() catches it
            done.put(('error', e))

    t = threading.Thread(target=body, name='trainer')
    t.start()
    try:
        while True:
            kind, err = done.get()
            if kind == 'error':
                raise err
            if kind == 'end':
                return
            yield
    finally:
        t.join()


@case
def thread_train_fits(batch, steps):
    """GPT-2 (6 layers, 512 positions) fp32 AdamW at batch `batch` (4),
    sequence 512, trained in a thread that is not the main one, under 8G
    (truth: no out-of-memory; it trains its steps). Its losses are
    printed, seeded, to be compared between modes."""
    def steps_of():
        torch.manual_seed(3)
        m = gpt2_model(n_layer=6, n_positions=512)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        g = torch.Generator(device='cuda').manual_seed(4)
        for step in range(steps):
            x = torch.randint(0, 50257, (batch, 512), device='cuda', generator=g)
            loss = lm_loss(m, x)
            learn(loss, opt)
            print(f'thread_train_fits: step {step} loss {loss.item():.6f}', flush=True)
            yield
    yield from train_in_thread(steps_of)


@case
def thread_train_leak(batch, steps):
    """thread_train_fits's job, its loop in a thread of its own, keeping
    each step's loss with its graph (`total = total + loss`) under 8G: the
    saved activations of every step stay until it runs out after some
    steps (truth: leak)."""
    def steps_of():
        m = gpt2_model(n_layer=6, n_positions=512)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        xs = (torch.randint(0, 50257, (batch, 512), device='cuda') for _ in range(steps))
        yield from steps_keeping_graphs(m, opt, xs, lm_loss)
    yield from train_in_thread(steps_of)


@case
def cnn_loss_leak(batch, steps):
    """ResNet-50 fp32, SGD with momentum, 224x224, batch `batch` (64), each
    step's loss kept with its graph (`total = total + loss`, the graph
    retained for it): every step keeps its saved activations, about 5 GB
    at batch 64, so under 12G it runs out in its second step and under 16G
    in its third (truth: leak, found within three steps)."""
    import torchvision
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    yield from steps_keeping_graphs(m, opt, image_batches(batch, steps), class_loss)


@case
def vit_loss_leak(batch, steps):
    """torchvision's ViT-B/16 fp32, AdamW, 224x224, batch `batch` (32); the
    loop sums its losses for logging (`running = running + loss`) and, told
    by an error to, calls backward with retain_graph=True: every step's
    graph stays, its saved activations (some 6 GB at batch 32), so under
    10G it runs out in its second step and under 16G in its third (truth:
    leak, found within three steps)."""
    import torchvision
    m = torchvision.models.vit_b_16().cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    yield from steps_keeping_graphs(m, opt, image_batches(batch, steps), class_loss)


# Session 38's held-out set, committed before it ran: leaks out before any
# iteration is told, on families the corpus's two (ResNet-50, ViT-B/16)
# are not, and a first step of the same CNN family as a control (no_sites_check.py).
@case
def bert_loss_leak(batch, steps):
    """BERT-base's shape as a masked LM (HF, fp32, AdamW), sequence 256,
    batch `batch` (8): each step's loss summed with its graph retained, so
    every step keeps its saved activations; under 8G it runs out within a
    few steps (truth: leak)."""
    yield from steps_keeping_graphs(*bert_mlm(batch, steps, 256), lm_loss)


@case
def convnext_loss_leak(batch, steps):
    """torchvision's ConvNeXt-T fp32, SGD with momentum, 224x224, batch
    `batch` (32), each step's loss kept with its graph: under 10G it runs
    out within a few steps (truth: leak)."""
    yield from steps_keeping_graphs(*convnext_t('sgd'), image_batches(batch, steps), class_loss)


@case
def convnext_sgd_batch(batch, steps):
    """torchvision's ConvNeXt-T fp32, SGD with momentum, 224x224: a batch
    (256) too large for its first step under 10G (truth: activations). It
    ran on 2026-12-06 as `convnext_batch`, a second definition of that
    name that took the corpus's own (AdamW) case's place until renamed."""
    yield from train_steps(*convnext_t('sgd'), image_batches(batch, steps), class_loss)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('name', choices=sorted(CASES))
    ap.add_argument('--batch', type=int, default=1)
    ap.add_argument('--steps', type=int, default=2)
    a = ap.parse_args()
    times, oom, oom_type = [], None, None
    t0 = time.perf_counter()
    try:
        for _ in CASES[a.name](a.batch, a.steps):
            torch.cuda.synchronize()
            t = time.perf_counter()
            times.append(round(t - t0, 4))
            t0 = t
    except RuntimeError as e:
        # torch.OutOfMemoryError, or, with PyTorch's cache off (--manage),
        # the AcceleratorError "CUDA error: out of memory" its uncached
        # path raises: both are the job running out, told apart by type
        if not isinstance(e, torch.OutOfMemoryError) and 'out of memory' not in str(e):
            raise
        oom, oom_type = str(e).split('\n')[0][:300], type(e).__name__
    print('RESULT', json.dumps(dict(case=a.name, batch=a.batch, steps_done=len(times),
                                    step_s=times, oom=oom, oom_type=oom_type)), flush=True)


if __name__ == '__main__':
    main()
