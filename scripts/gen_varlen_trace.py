#!/usr/bin/env python3
"""gen_varlen_trace.py: writes a synthetic allocation trace (the CSV of
PyTorch's recorder, /work/shared/traces/README.md) of a Llama-style training
job whose sequence length is drawn per step: 12 layers, hidden 2048, MLP
5504, vocabulary 32000, batch 4, fp32 weights under bf16 autocast, gradient
checkpointing per layer, AdamW (its state made at the first step), gradients
set to None after each step. Lengths are seeded, from 256 to 4096.

The tensors are what such a step asks of an allocator, from a model of the
step (which tensors live while which op runs), not a recording: sizes
scale with the length as the real ones do, and the order of frees follows
the forward, the recomputation and the backward of each checkpointed
layer. tests/data/llama_varlen.csv.gz is its output with the defaults (the
replay tests pin the driver calls on it); gzip'd without a timestamp, so
the same arguments give the same bytes.

With --generate it writes instead a generation job on the same
architecture in bf16: calls of Hugging Face generate with a batch of 1-16
and a prompt of 128-1024 tokens drawn per call, 48 new tokens each, the KV
cache of each layer grown by concatenation at every token (DynamicCache)
and freed at the end of the call; the logits of the last position only.
tests/data/llama_generate.csv.gz is its output with --generate --layers 4
--steps 6 (calls of batch and prompt 5x710, 3x389, 4x635, 15x611, 13x935,
7x224).

usage: gen_varlen_trace.py OUT.csv.gz [--steps N] [--seed K] [--layers L] [--generate]
"""
import argparse
import gzip
import random

H, I, V, B = 2048, 5504, 32000, 4


def rounded(size):
    return max(512, (size + 511) // 512 * 512)


class Trace:
    def __init__(self):
        self.lines = ["# time_us,action,addr,size,stream,frames\n"]
        self.t = 1_000_000
        self.next_addr = 0x7F0000000000
        self.live = {}

    def alloc(self, size, site):
        size = rounded(size)
        addr = self.next_addr
        self.next_addr += size + 512  # trace addresses only name tensors
        self.t += 3
        self.lines.append(f"{self.t},alloc,{addr:#x},{size},0,{site}\n")
        self.live[addr] = (size, site)
        return addr

    def free(self, addr):
        size, site = self.live.pop(addr)
        self.t += 2
        self.lines.append(f"{self.t},free_requested,{addr:#x},{size},0,{site}\n"
                          f"{self.t},free_completed,{addr:#x},{size},0,{site}\n")

    def free_all(self, addrs):
        for a in addrs:
            self.free(a)


def site(op, line):
    return f"llama.py:{line}:{op};module.py:1790:_call_impl;module.py:1779:_wrapped_call_impl;train.py:40:step"


def layer_forward(tr, s, keep):
    """One decoder layer's forward: its temporaries, which keep=True holds
    for the backward (the recomputation); returns them and the output."""
    a16, a32, m16 = B * s * H * 2, B * s * H * 4, B * s * I * 2
    held = []
    norm = tr.alloc(a32, site("rmsnorm", 60))
    for w in ("q_proj", "k_proj", "v_proj"):
        cast = tr.alloc(H * H * 2, site("autocast_" + w, 70))
        held.append(tr.alloc(a16, site(w, 71)))
        tr.free(cast)
    rope = [tr.alloc(a16, site("rotary", 80)) for _ in range(2)]
    attn = tr.alloc(a16, site("sdpa", 90))
    lse = tr.alloc(B * 16 * s * 4, site("sdpa_lse", 91))
    cast = tr.alloc(H * H * 2, site("autocast_o_proj", 95))
    o = tr.alloc(a16, site("o_proj", 96))
    tr.free(cast)
    mid = tr.alloc(a32, site("residual", 100))
    norm2 = tr.alloc(a32, site("rmsnorm", 60))
    mlp = []
    for w in ("gate_proj", "up_proj"):
        cast = tr.alloc(H * I * 2, site("autocast_" + w, 110))
        mlp.append(tr.alloc(m16, site(w, 111)))
        tr.free(cast)
    act = tr.alloc(m16, site("silu_mul", 115))
    cast = tr.alloc(H * I * 2, site("autocast_down_proj", 120))
    down = tr.alloc(a16, site("down_proj", 121))
    tr.free(cast)
    out = tr.alloc(a32, site("residual", 125))
    temps = [norm] + held + rope + [attn, lse, o, mid, norm2] + mlp + [act, down]
    if not keep:
        tr.free_all(temps)
        temps = []
    return temps, out


def layer_backward(tr, s, saved, grads):
    """Backward through a recomputed layer: activation gradients made and
    dropped op by op, the saved tensors freed as they are consumed, weight
    gradients made (at the first step of each set_to_none cycle)."""
    a16, a32, m16 = B * s * H * 2, B * s * H * 4, B * s * I * 2
    g = tr.alloc(a32, site("residual_backward", 125))
    for w, size in (("down_proj", H * I), ("up_proj", H * I), ("gate_proj", H * I),
                    ("o_proj", H * H), ("v_proj", H * H), ("k_proj", H * H), ("q_proj", H * H)):
        cast = tr.alloc(size * 2, site("autocast_" + w, 130))
        gin = tr.alloc(m16 if w in ("up_proj", "gate_proj") else a16,
                       site(w + "_backward", 131))
        gw16 = tr.alloc(size * 2, site(w + "_weight_grad", 132))
        grads.append(tr.alloc(size * 4, site("accumulate_grad", 133)))
        tr.free(gw16)
        tr.free(cast)
        if saved:
            tr.free(saved.pop())
        tr.free(gin)
    while saved:
        tr.free(saved.pop())
    for _ in range(2):
        grads.append(tr.alloc(H * 4, site("norm_weight_grad", 140)))
    return g


def step(tr, s, weights, state):
    ids = tr.alloc(B * s * 8, site("input_ids", 20))
    labels = tr.alloc(B * s * 8, site("labels", 21))
    hidden = tr.alloc(B * s * H * 4, site("embedding", 30))
    inputs = []
    for _ in range(LAYERS):
        _, out = layer_forward(tr, s, keep=False)
        inputs.append(hidden)
        hidden = out
    norm = tr.alloc(B * s * H * 4, site("final_norm", 150))
    cast = tr.alloc(V * H * 2, site("autocast_lm_head", 155))
    logits = tr.alloc(B * s * V * 2, site("lm_head", 156))
    tr.free(cast)
    flogits = tr.alloc(B * s * V * 4, site("logits_float", 160))
    lsm = tr.alloc(B * s * V * 4, site("log_softmax", 161))
    loss = tr.alloc(512, site("loss", 162))
    tr.free(flogits)
    # backward of the loss and the head
    glsm = tr.alloc(B * s * V * 4, site("nll_backward", 165))
    tr.free(lsm)
    glog = tr.alloc(B * s * V * 2, site("log_softmax_backward", 166))
    tr.free(glsm)
    grads = [tr.alloc(V * H * 4, site("accumulate_grad", 133))]
    tr.free(logits)
    g = tr.alloc(B * s * H * 4, site("lm_head_backward", 167))
    tr.free(glog)
    tr.free(norm)
    tr.free(hidden)
    for layer in reversed(range(LAYERS)):
        saved, out = layer_forward(tr, s, keep=True)  # the recomputation
        tr.free(out)
        g_in = layer_backward(tr, s, saved, grads)
        tr.free(g)
        g = g_in
        tr.free(inputs[layer])
    grads.append(tr.alloc(V * H * 4, site("embedding_backward", 170)))
    tr.free(g)
    tr.free(ids)
    tr.free(labels)
    tr.free(loss)
    # AdamW: its state at the first step, foreach temporaries each step
    if not state:
        for w in weights:
            size = tr.live[w][0]
            state.append(tr.alloc(size, site("exp_avg", 200)))
            state.append(tr.alloc(size, site("exp_avg_sq", 201)))
    for gr in grads:
        tmp = tr.alloc(tr.live[gr][0], site("adamw_foreach", 210))
        tr.free(tmp)
    tr.free_all(grads)  # zero_grad(set_to_none=True)


def generate_call(tr, batch, prompt, new_tokens):
    """One generate call: the prefill over the prompt, then a token at a
    time, each layer's keys and values concatenated onto its cache."""
    ids_ = tr.alloc(batch * prompt * 8, site("input_ids", 20))
    mask = tr.alloc(batch * prompt * 8, site("attention_mask", 21))
    cache = []
    length = prompt
    for t in range(new_tokens + 1):
        n = prompt if t == 0 else 1
        hidden = tr.alloc(batch * n * H * 2, site("embedding", 30))
        for layer in range(LAYERS):
            norm = tr.alloc(batch * n * H * 2, site("rmsnorm", 60))
            q = tr.alloc(batch * n * H * 2, site("q_proj", 71))
            k = tr.alloc(batch * n * H * 2, site("k_proj", 71))
            v = tr.alloc(batch * n * H * 2, site("v_proj", 71))
            if t == 0:
                cache.append([k, v])  # the prompt's keys and values are the cache
            else:
                for i, new in enumerate((k, v)):
                    grown = tr.alloc(batch * length * H * 2, site("cache_update", 85))
                    tr.free(cache[layer][i])
                    tr.free(new)
                    cache[layer][i] = grown
            attn = tr.alloc(batch * n * H * 2, site("sdpa", 90))
            o = tr.alloc(batch * n * H * 2, site("o_proj", 96))
            tr.free_all([norm, q, attn])
            norm2 = tr.alloc(batch * n * H * 2, site("rmsnorm", 60))
            gate = tr.alloc(batch * n * I * 2, site("gate_proj", 111))
            up = tr.alloc(batch * n * I * 2, site("up_proj", 111))
            act = tr.alloc(batch * n * I * 2, site("silu_mul", 115))
            tr.free_all([gate, up])
            down = tr.alloc(batch * n * H * 2, site("down_proj", 121))
            tr.free_all([act, norm2])
            out = tr.alloc(batch * n * H * 2, site("residual", 125))
            tr.free_all([o, down, hidden])
            hidden = out
        logits = tr.alloc(batch * V * 4, site("lm_head", 156))
        nxt = tr.alloc(batch * 8, site("argmax", 170))
        tr.free_all([hidden, logits, nxt])
        length += 1
    for k, v in cache:
        tr.free_all([k, v])
    tr.free_all([ids_, mask])


def main():
    global LAYERS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--generate", action="store_true")
    a = ap.parse_args()
    LAYERS = a.layers
    rng = random.Random(a.seed)
    tr = Trace()
    if a.generate:
        write_generation(tr, rng, a.steps)
    else:
        write_training(tr, rng, a.steps)
    with open(a.out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0,
                                                 filename="") as f:
        f.write("".join(tr.lines).encode())


def write_generation(tr, rng, calls):
    for _ in range(LAYERS):  # bf16 weights
        for size in (H * H,) * 4 + (H * I,) * 3:
            tr.alloc(size * 2, site("linear_weight", 11))
    tr.alloc(V * H * 2, site("embed_tokens", 10))
    tr.alloc(V * H * 2, site("lm_head_weight", 13))
    for _ in range(calls):
        generate_call(tr, rng.randint(1, 16), rng.randint(128, 1024), 48)


def write_training(tr, rng, steps):
    weights = [tr.alloc(V * H * 4, site("embed_tokens", 10))]
    for _ in range(LAYERS):
        for size in (H * H,) * 4 + (H * I,) * 3:
            weights.append(tr.alloc(size * 4, site("linear_weight", 11)))
        weights += [tr.alloc(H * 4, site("norm_weight", 12)) for _ in range(2)]
    weights.append(tr.alloc(H * 4, site("norm_weight", 12)))
    weights.append(tr.alloc(V * H * 4, site("lm_head_weight", 13)))
    state = []
    for i in range(steps):
        s = rng.randint(256, 4096)
        step(tr, s, weights, state)


LAYERS = 12
main()
