"""module.py: named as torch/nn/modules/module.py, with its functions'
names: weights come from Module.to through _apply's convert lambda (the
frames PyTorch's recorder shows: <lambda>;_apply), activations from
forward through _call_impl."""
import ctypes

from device import BLOCK, free, ok, runtime


class Module:
    def __init__(self, count):
        self.count = count
        self.params = []

    def _apply(self, fn):
        for _ in range(self.count):
            self.params.append(fn())
        return self

    def to(self):
        return self._apply(
            lambda: (p := ctypes.c_void_p(), runtime.cudaMalloc(ctypes.byref(p), BLOCK), p))

    def forward(self):
        out = []
        for _ in range(2):
            ptr = ctypes.c_void_p()
            out.append((ptr, runtime.cudaMalloc(ctypes.byref(ptr), BLOCK), ptr))
        return out

    def _call_impl(self):
        return self.forward()

    __call__ = _call_impl


def checked(made):
    for _, err, _ in made:
        ok(err)
    return [ptr for ptr, _, _ in made]


def release(ptrs):
    for ptr in ptrs:
        free(ptr)
