"""adam.py: named as torch/optim/adam.py: the state made at the first
step (_init_group: two buffers a parameter, as exp_avg and exp_avg_sq),
and a temporary of each step (_multi_tensor_adam)."""
import ctypes

from device import BLOCK, free, ok, runtime


class Adam:
    def __init__(self, params):
        self.params = params
        self.state = []

    def _init_group(self):
        for _ in range(2 * len(self.params)):
            ptr = ctypes.c_void_p()
            ok(runtime.cudaMalloc(ctypes.byref(ptr), BLOCK))
            self.state.append(ptr)

    def _multi_tensor_adam(self):
        ptr = ctypes.c_void_p()
        ok(runtime.cudaMalloc(ctypes.byref(ptr), BLOCK))
        free(ptr)

    def step(self):
        if not self.state:
            self._init_group()
        self._multi_tensor_adam()
