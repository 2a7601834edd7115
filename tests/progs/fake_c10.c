/* fake_c10.c: a library named as PyTorch's libc10_cuda.so, for the tests
 * that ask whether PyTorch is in the process (manage_prog's torch_oom). */
int fake_c10_cuda_marker(void);

int fake_c10_cuda_marker(void)
{
  return 10;
}
