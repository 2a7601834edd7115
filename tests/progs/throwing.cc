// throwing.cc: a C++ library for the tests that throws as PyTorch does,
// loaded by throw_prog.c with RTLD_LOCAL as Python loads torch's libraries
// (libstdc++ with them, outside the global scope).
//
// PyTorch's caching allocator raises c10::OutOfMemoryError, a class derived
// from std::exception; under torch.cuda.set_per_process_memory_fraction it
// does so at its own limit, with no cudaMalloc refused. This program
// declares classes of the same names (so their types are mangled as
// PyTorch's are), holds memory of the simulated runtime, and throws:
//
//   fraction  48 MiB held, then PyTorch's refusal of 32 MiB at "64.00 MiB
//             allowed", caught
//   device    on a 64 MiB device (OOMLENS_CAPACITY), a cudaMalloc refused
//             twice and cudaMemGetInfo asked (PyTorch giving up), then the
//             same error with a limit in its message: one refusal, seen
//             once
//   pieces    PyTorch loaded (throw_prog), 64 MiB device: 48 MiB held, a
//             cudaMalloc of 24 MiB refused twice, cudaMemGetInfo asked,
//             then PyTorch's error saying 20 MiB of its 48 are tensors and
//             28 MiB reserved but free: its free blocks, in pieces
//   other     48 MiB held, then a c10::Error that is not an out-of-memory
//
// throwing_main returns 0 once it has caught what it threw;
// tests/test_preload.c checks what oomlens said.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include <cuda_runtime_api.h>

namespace c10 {
class Error : public std::exception {
 public:
  explicit Error(std::string message) : message_(std::move(message)) {}
  const char *what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};
}  // namespace c10

static const size_t MiB = 1u << 20;

static const char *const kMessage =
    "CUDA out of memory. Tried to allocate 32.00 MiB. GPU 0 has a total capacity of 64.00 MiB "
    "of which 16.00 MiB is free. Including non-PyTorch memory, this process has 48.00 MiB "
    "memory in use. 64.00 MiB allowed; Of the allocated memory 48.00 MiB is allocated by "
    "PyTorch, and 0 bytes is reserved by PyTorch but unallocated.";

static const char *const kPiecesMessage =
    "CUDA out of memory. Tried to allocate 24.00 MiB. GPU 0 has a total capacity of 64.00 MiB "
    "of which 16.00 MiB is free. Including non-PyTorch memory, this process has 48.00 MiB "
    "memory in use. Of the allocated memory 20.00 MiB is allocated by PyTorch, and 28.00 MiB "
    "is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
    "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.";

static int fail(const char *what) {
  std::fprintf(stderr, "throw_prog: %s\n", what);
  return 3;
}

template <class E>
static bool thrown_and_caught(const char *message) {
  try {
    throw E(message);
  } catch (const c10::Error &e) {
    return std::strcmp(e.what(), message) == 0;
  }
}

// PyTorch's cache giving up on a request of size: refused, refused again
// after it released its cache, the memory asked for its message, then its
// error thrown (and caught). 0, or what went otherwise.
static const char *gave_up(size_t size, const char *message) {
  void *p = nullptr;
  if (cudaMalloc(&p, size) != cudaErrorMemoryAllocation) return "request served";
  if (cudaMalloc(&p, size) != cudaErrorMemoryAllocation) return "retry served";
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return "no memory info";
  return thrown_and_caught<c10::OutOfMemoryError>(message) ? nullptr : "not caught";
}

extern "C" __attribute__((visibility("default"))) int throwing_main(const char *scenario) {
  std::string how = scenario;
  void *held = nullptr;
  const char *wrong = nullptr;
  if (cudaMalloc(&held, 48 * MiB) != cudaSuccess) return fail("48 MiB refused");
  if (how == "fraction") {
    if (!thrown_and_caught<c10::OutOfMemoryError>(kMessage)) wrong = "not caught";
  } else if (how == "device") {
    wrong = gave_up(32 * MiB, kMessage);
  } else if (how == "pieces") {
    wrong = gave_up(24 * MiB, kPiecesMessage);
  } else if (how == "other") {
    if (!thrown_and_caught<c10::Error>("CUDA error: an illegal memory access, 64.00 MiB allowed;"))
      wrong = "not caught";
  } else {
    wrong = "no such scenario";
  }
  if (wrong) return fail(wrong);
  std::fprintf(stderr, "throw_prog: caught\n");
  return cudaFree(held) == cudaSuccess ? 0 : fail("free failed");
}
