"""The jobs of manage_check.py (issue 16), one per process, seeded so that
every run of a job asks for the same shapes in the same order and computes
the same numbers whatever allocator serves it.

usage: manage_jobs.py JOB [--steps N] [--warm W]
JOB: gpt2, resnet50, gpt2_varlen, llama_varlen (Llama-style, 12 layers,
hidden 2048, gradient checkpointing, AdamW, bf16 autocast, batch 4, sequence
length drawn per step from 256 to 4096) or generate (the same architecture
in bf16 calling Hugging Face generate with a batch of 1-16 and a prompt of
128-1024 tokens drawn per call, 48 new tokens each).

Prints per step (a generate call is a step) `STEP seconds` and `LOSS value`
(for generate, a checksum of the tokens made); then `RESULT {json}` with
PyTorch's own peaks. After W steps, if MANAGE_CHECK_MARK names a file, it
sends itself SIGUSR1 (oomlens writes its reports then) and copies the JSON
report there once written, so the steady state's calls are the final
report's less these.

MANAGE_JOBS_REPEAT=N runs each drawn step N times over (the same shapes
and inputs; N x steps steps in all); MANAGE_JOBS_CAPTURE_AB=1 (with N = 3)
turns oomlens's call-site capture on and off step by step (oomlens_capture:
each shape's first run is not compared, its other two are a pair, on/off
then off/on) and prints `CAPTURE 1|0|-1` after each STEP:
capture_ab.py's measure of what the capture costs, step against step in
one process."""
import argparse, ctypes, json, os, random, shutil, signal, sys, time

import torch


REPEAT = int(os.environ.get('MANAGE_JOBS_REPEAT', '1'))


def deterministic():
    os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


def ids(gen, batch, length, vocab):
    return torch.randint(0, vocab, (batch, length), generator=gen).cuda()


def gpt2(steps):
    from transformers import GPT2Config, GPT2LMHeadModel
    m = GPT2LMHeadModel(GPT2Config()).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = ids(gen, 16, 1024, 50257)
        for _ in range(REPEAT):
            with torch.autocast('cuda', dtype=torch.bfloat16):
                loss = m(input_ids=x, labels=x).loss
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
            yield loss.item()


def resnet50(steps):
    import torchvision
    m = torchvision.models.resnet50().cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler('cuda')
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(128, 3, 224, 224, generator=gen).cuda()
        y = torch.randint(0, 1000, (128,), generator=gen).cuda()
        for _ in range(REPEAT):
            with torch.autocast('cuda', dtype=torch.float16):
                loss = torch.nn.functional.cross_entropy(m(x), y)
            scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
            opt.zero_grad(set_to_none=True)
            yield loss.item()


def video(steps):
    # a 3D CNN (torchvision's r3d_18) on clips of 16 frames of 112x112,
    # batch 8, fp32: held-out video_fits's job, whose cuDNN streams held
    # every free in a batch (docs/measurements.md, session 22)
    import torchvision
    m = torchvision.models.video.r3d_18(num_classes=400).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(8, 3, 16, 112, 112, generator=gen).cuda()
        y = torch.randint(0, 400, (8,), generator=gen).cuda()
        for _ in range(REPEAT):
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
            yield loss.item()


def gpt2_varlen(steps):
    # as /work/shared/gpu/workloads.py's: lengths and batches per step
    from transformers import GPT2Config, GPT2LMHeadModel
    m = GPT2LMHeadModel(GPT2Config(n_layer=16, n_positions=2048)).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    rng, gen = random.Random(3), torch.Generator().manual_seed(1)
    for _ in range(steps):
        length = rng.choice([200, 333, 512, 700, 1024, 1500, 2048]); batch = rng.choice([4, 6, 8])
        x = ids(gen, batch, length, 50257)
        for _ in range(REPEAT):
            with torch.autocast('cuda', dtype=torch.bfloat16):
                loss = m(input_ids=x, labels=x).loss
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
            yield loss.item()


def llama_config():
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5504,
                       num_hidden_layers=12, num_attention_heads=16, num_key_value_heads=16,
                       max_position_embeddings=4096)


def llama_varlen(steps):
    from transformers import LlamaForCausalLM
    m = LlamaForCausalLM(llama_config()).cuda()
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})
    m.train()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    rng, gen = random.Random(5), torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = ids(gen, 4, rng.randint(256, 4096), 32000)
        for _ in range(REPEAT):
            with torch.autocast('cuda', dtype=torch.bfloat16):
                loss = m(input_ids=x, labels=x).loss
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
            yield loss.item()


def generate(steps):
    from transformers import LlamaForCausalLM
    m = LlamaForCausalLM(llama_config()).to(device='cuda', dtype=torch.bfloat16).eval()
    m.generation_config.eos_token_id = None  # random weights: never stop early
    m.generation_config.pad_token_id = 0
    rng, gen = random.Random(7), torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = ids(gen, rng.randint(1, 16), rng.randint(128, 1024), 32000)
        for _ in range(REPEAT):
            with torch.no_grad():
                out = m.generate(input_ids=x, attention_mask=torch.ones_like(x),
                                 max_new_tokens=48, min_new_tokens=48, do_sample=False)
            yield float(out[:, x.shape[1]:].sum().item())


JOBS = dict(gpt2=gpt2, resnet50=resnet50, gpt2_varlen=gpt2_varlen, llama_varlen=llama_varlen,
            generate=generate, video=video)


def mark_report(path):
    """SIGUSR1 makes oomlens write its reports; the JSON one is copied to
    path once it has been rewritten (up to 5 s)."""
    pattern = os.environ.get('OOMLENS_REPORT', '')
    if not pattern:
        return
    report = pattern.replace('%p', str(os.getpid())).replace('%r', os.environ.get('RANK', '0'))
    report = os.path.splitext(report)[0] + '.json'
    before = os.stat(report).st_mtime_ns if os.path.exists(report) else 0
    os.kill(os.getpid(), signal.SIGUSR1)
    for _ in range(100):
        if os.path.exists(report) and os.stat(report).st_mtime_ns != before:
            time.sleep(0.05)  # written to a temporary file and renamed: whole once there
            shutil.copyfile(report, path)
            return
        time.sleep(0.05)


def capture_switch():
    """oomlens_capture from the preloaded library, when MANAGE_JOBS_CAPTURE_AB=1;
    =control: the same pairs and labels with the capture on throughout (what
    the pairs differ by their order alone)."""
    mode = os.environ.get('MANAGE_JOBS_CAPTURE_AB')
    if mode not in ('1', 'control'):
        return None
    fn = ctypes.CDLL(None).oomlens_capture  # AttributeError without oomlens: meant
    fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    return fn if mode == '1' else (lambda on: fn(1))


def capture_in(i):
    """Capture in step i, with each shape run three times (REPEAT=3): the
    first run of a shape takes its input's making and the pool's growth for
    it and is not compared (-1, capture on); the other two are a pair, on
    then off for even shapes, off then on for odd ones."""
    j, k = i % 3, i // 3
    if j == 0:
        return -1
    return int((j == 1) == (k % 2 == 0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('job', choices=sorted(JOBS))
    ap.add_argument('--steps', type=int, default=18)
    ap.add_argument('--warm', type=int, default=2)
    a = ap.parse_args()
    deterministic()
    torch.cuda.init()
    mark = os.environ.get('MANAGE_CHECK_MARK')
    capture = capture_switch()
    if capture:
        capture(abs(capture_in(0)))
    t0 = time.perf_counter()
    for i, loss in enumerate(JOBS[a.job](a.steps)):
        torch.cuda.synchronize()
        print('STEP', round(time.perf_counter() - t0, 5), flush=True)
        print('LOSS', repr(loss), flush=True)
        if capture:
            print('CAPTURE', capture_in(i), flush=True)
            capture(abs(capture_in(i + 1)))  # a shape's first run: on
        if mark and i + 1 == a.warm:
            mark_report(mark)
        t0 = time.perf_counter()
    st = torch.cuda.memory_stats()
    print('RESULT', json.dumps(dict(job=a.job, conf=os.environ.get('PYTORCH_CUDA_ALLOC_CONF', 'default'),
                                    peak_alloc=st.get('allocated_bytes.all.peak', 0),
                                    peak_reserved=st.get('reserved_bytes.all.peak', 0))), flush=True)


if __name__ == '__main__':
    sys.exit(main())
