"""train.py LIBCUDART [STEPS]: a training loop whose device memory comes
from files and functions named as PyTorch's, for tests/process/test_roles.c.

Per step: the forward's activations (module.py's forward), the backward on
a thread named as PyTorch's autograd engine names its device threads
("pt_autograd_0"), which makes one temporary and a gradient a parameter
and frees the activations, the optimizer's step (adam.py), then zero_grad
frees the gradients (set_to_none, PyTorch's default). Blocks of 32 MiB:
3 weights, 2 activations, 1 backward temporary, 3 gradients, 6 optimizer
state, 1 optimizer temporary, and 1 input batch (no role: other). The
peak is the first step's optimizer temporary: weights 96 MiB, gradients
96, optimizer 224, other 32; at exit weights 96, optimizer 192, other 32."""
import ctypes
import sys
import threading

from adam import Adam
from device import BLOCK, free, ok, runtime
from module import Module, checked, release

PR_SET_NAME = 15
libc = ctypes.CDLL(None)


def load_batch():
    ptr = ctypes.c_void_p()
    ok(runtime.cudaMalloc(ctypes.byref(ptr), BLOCK))
    return ptr


def engine_work(activations, grads, count):
    temp = ctypes.c_void_p()
    ok(runtime.cudaMalloc(ctypes.byref(temp), BLOCK))
    for _ in range(count):
        grad = ctypes.c_void_p()
        ok(runtime.cudaMalloc(ctypes.byref(grad), BLOCK))
        grads.append(grad)
    free(temp)
    release(activations)


def autograd_thread(activations, grads, count):
    libc.prctl(PR_SET_NAME, b"pt_autograd_0", 0, 0, 0)
    engine_work(activations, grads, count)


def run_backward(activations, count):
    grads = []
    t = threading.Thread(target=autograd_thread, args=(activations, grads, count))
    t.start()
    t.join()
    return grads


def main(steps):
    model = Module(3).to()
    model.params = checked(model.params)
    batch = load_batch()
    opt = Adam(model.params)
    for _ in range(steps):
        activations = checked(model())
        grads = run_backward(activations, len(model.params))
        opt.step()
        release(grads)  # zero_grad(set_to_none=True)
    return batch


if __name__ == "__main__":
    kept = main(int(sys.argv[2]) if len(sys.argv) > 2 else 3)
