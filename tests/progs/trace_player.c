/* trace_player.c: plays a recorded PyTorch allocation trace (the CSV of
 * tests/data, gzip'd or plain) as a job would with PyTorch's cache off:
 * every `alloc` a cudaMalloc, every `free_completed` a cudaFree. Run under
 * liboomlens.so on the simulated CUDA, it is the demo of a real job without
 * a GPU, and a test that the report's figures match the trace's own. The
 * trace's `oom` event (the request that failed when it was recorded) is
 * asked for again.
 *
 * usage: trace_player TRACE.csv[.gz]
 * prints: events=N allocs=N peak_allocated=BYTES live_at_end=BYTES */
#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <zlib.h>

typedef struct live {
  uint64_t trace_addr;
  void *ptr;
  uint64_t size;
  UT_hash_handle hh;
} live_t;

static live_t *table;
static uint64_t current, peak;

static int fail(const char *path, long line, const char *what)
{
  fprintf(stderr, "trace_player: %s:%ld: %s\n", path, line, what);
  return 2;
}

static int play_alloc(uint64_t addr, uint64_t size)
{
  live_t *rec = malloc(sizeof *rec);
  if (!rec)
    return -1;
  if (cudaMalloc(&rec->ptr, size) != cudaSuccess) {
    free(rec);
    return -1;
  }
  rec->trace_addr = addr;
  rec->size = size;
  HASH_ADD(hh, table, trace_addr, sizeof addr, rec);
  current += size;
  if (current > peak)
    peak = current;
  return 0;
}

static void play_free(uint64_t addr)
{
  live_t *rec;
  HASH_FIND(hh, table, &addr, sizeof addr, rec);
  if (!rec)
    return; /* allocated before the recording started */
  HASH_DELETE(hh, table, rec);
  cudaFree(rec->ptr);
  current -= rec->size;
  free(rec);
}

int main(int argc, char **argv)
{
  if (argc != 2) {
    fprintf(stderr, "usage: trace_player TRACE.csv[.gz]\n");
    return 2;
  }
  gzFile in = gzopen(argv[1], "rb");
  if (!in) {
    perror(argv[1]);
    return 2;
  }
  char line[8192];
  long number = 0, events = 0, allocs = 0;
  while (gzgets(in, line, sizeof line)) {
    number++;
    if (line[0] == '#' || line[0] == '\n')
      continue;
    char action[32];
    uint64_t addr, size;
    if (sscanf(line, "%*[^,],%31[^,],%" SCNx64 ",%" SCNu64 ",", action, &addr, &size) != 3)
      return fail(argv[1], number, "expected time_us,action,addr,size,...");
    events++;
    if (strcmp(action, "alloc") == 0) {
      allocs++;
      if (play_alloc(addr, size) != 0)
        return fail(argv[1], number, "cudaMalloc failed");
    } else if (strcmp(action, "free_completed") == 0) {
      play_free(addr);
    } else if (strcmp(action, "oom") == 0) {
      /* The request that failed in the recorded run, asked again: on a
       * device as small as the recorded cap it fails here too, and the
       * report explains it. */
      void *p;
      if (cudaMalloc(&p, size) == cudaSuccess)
        cudaFree(p);
    }
  }
  gzclose(in);
  printf("events=%ld allocs=%ld peak_allocated=%" PRIu64 " live_at_end=%" PRIu64 "\n", events,
         allocs, peak, current);
  return 0;
}
