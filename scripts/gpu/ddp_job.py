"""One rank of a small data-parallel training job, for ddp_check.py:

    python3 -m torch.distributed.run --standalone --nproc_per_node 2 \
        ddp_job.py [--steps N] [--seq L] [--long-rank R --long-seq L2] \
        [--checkpoint-at STEP] [--backend nccl|gloo|auto]

A transformer language model (8 layers, width 768, vocabulary 32000),
AdamW, seeded tokens, wrapped in DistributedDataParallel. Rank R reads
sequences of L2 tokens where the others read L (a rank with longer
samples). --checkpoint-at: after that step's backward, rank 0 gathers a
full copy of the model and optimizer state on the device before saving it
(as a consolidated checkpoint does). The backend is NCCL when each rank
has its own GPU, else gloo (NCCL refuses two ranks on one device). Each
rank prints one `RESULT {json}` line: its rank, device, backend, PyTorch's
own peaks, the step times, the losses, and the OOM if it ran out."""
import argparse, json, os, time
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 32000


class LM(nn.Module):
    def __init__(self, width=768, layers=8):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, width)
        layer = nn.TransformerEncoderLayer(width, 12, 4 * width, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, VOCAB)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


def save_checkpoint(model, opt, path):
    """Rank 0's consolidated copy: every parameter and optimizer tensor
    gathered on the device, then written."""
    full = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for i, st in enumerate(opt.state.values()):
        for k, v in st.items():
            if torch.is_tensor(v) and v.is_cuda:
                full[f'opt.{i}.{k}'] = v.detach().clone()
    torch.save(full, path)
    del full


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--steps', type=int, default=8)
    ap.add_argument('--batch', type=int, default=2)
    ap.add_argument('--seq', type=int, default=256)
    ap.add_argument('--long-rank', type=int, default=-1)
    ap.add_argument('--long-seq', type=int, default=4096)
    ap.add_argument('--checkpoint-at', type=int, default=-1)
    ap.add_argument('--checkpoint-path', default=os.devnull)
    ap.add_argument('--backend', default='auto')
    a = ap.parse_args()
    rank, world = int(os.environ['RANK']), int(os.environ['WORLD_SIZE'])
    local = int(os.environ.get('LOCAL_RANK', rank))
    device = local % torch.cuda.device_count()
    torch.cuda.set_device(device)
    backend = a.backend
    if backend == 'auto':
        backend = 'nccl' if torch.cuda.device_count() >= world else 'gloo'
    dist.init_process_group(backend)
    torch.manual_seed(1234)
    model = LM().cuda()
    ddp = DDP(model, device_ids=[device] if backend == 'nccl' else None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seq = a.long_seq if rank == a.long_rank else a.seq
    gen = torch.Generator(device='cuda').manual_seed(100 + rank)
    times, losses, oom = [], [], None
    try:
        for step in range(a.steps):
            t0 = time.time()
            x = torch.randint(0, VOCAB, (a.batch, seq), device='cuda', generator=gen)
            loss = F.cross_entropy(ddp(x).view(-1, VOCAB), x.view(-1))
            loss.backward()
            if step == a.checkpoint_at and rank == 0:
                save_checkpoint(model, opt, a.checkpoint_path)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.item())
            torch.cuda.synchronize()
            times.append(time.time() - t0)
    except torch.cuda.OutOfMemoryError as e:
        oom = str(e).splitlines()[0][:300]
    print('RESULT', json.dumps(dict(
        rank=rank, device=device, backend=backend, seq=seq, steps_done=len(times),
        times=times, losses=losses, oom=oom,
        max_allocated=torch.cuda.max_memory_allocated(),
        max_reserved=torch.cuda.max_memory_reserved())), flush=True)
    if oom:
        raise SystemExit(1)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == '__main__':
    main()
