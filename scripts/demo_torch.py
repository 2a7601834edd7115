"""A few training steps of a small GPT-style model, for scripts/demo.sh on a
machine with a GPU. Plain PyTorch: oomlens needs no change to the job."""
import torch

torch.manual_seed(0)
layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, batch_first=True)
model = torch.nn.TransformerEncoder(layer, num_layers=6).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(5):
    x = torch.randn(32, 256, 512, device='cuda')
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step}: loss {loss.item():.4f}")
print("peak allocated by PyTorch:", torch.cuda.max_memory_allocated())
