/* check_pickle.h: the opcode walk of a memory_viz pickle, shared by the
 * export test (the shared traces) and the trace-file test (a trace a job
 * wrote on the simulated device): every opcode is one PyTorch's web viewer
 * reads. Include after <check.h> and check_run.h. */
#ifndef OL_CHECK_PICKLE_H
#define OL_CHECK_PICKLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The opcodes the unpickler of PyTorch's web viewer handles (the page
 * behind pytorch.org/memory_viz: pytorch/pytorch torch/utils/viz/
 * MemoryViz.js, function unpickle; the same set at commits c4b5ac720f83
 * and 00067369c933). Any other opcode, POP included, stops it with
 * "UNKNOWN OPCODE" and a blank page, though Python's pickle reads it. */
static const unsigned char ol_viewer_opcodes[] = {
  '(', '.', ')', ']', '}', 'a', 'e', 'd', 'l', 's', 't', 'u', 'G', 'J', 'K', 'M',
  'N', 'X', 'h', 'j', 'q', 'r', 0x80, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8c, 0x94, 0x95,
};

static inline bool ol_viewer_reads(unsigned char code)
{
  return memchr(ol_viewer_opcodes, code, sizeof ol_viewer_opcodes) != NULL;
}

static inline uint64_t ol_pickle_le(const unsigned char *p, int n)
{
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* Bytes of the argument after the opcode at p (n bytes left after it), -1
 * for an opcode this walker does not know. Protocol 2's opcodes, the
 * viewer's and the stack ones it lacks. */
static inline long ol_pickle_argument_bytes(const unsigned char *p, size_t n)
{
  switch (p[0]) {
  case 'K': case 'h': case 'q': case 0x80: return 1;
  case 'M': return 2;
  case 'J': case 'j': case 'r': return 4;
  case 'G': case 0x95: return 8;
  case 0x8a: case 0x8c: return n >= 1 ? 1 + (long)p[1] : 1;
  case 'X': return n >= 4 ? 4 + (long)ol_pickle_le(p + 1, 4) : 4;
  case '(': case '.': case ')': case ']': case '}': case 'a': case 'e': case 'd': case 'l':
  case 's': case 't': case 'u': case 'N': case '0': case '1': case '2': case 0x85: case 0x86:
  case 0x87: case 0x88: case 0x89: case 0x94: return 0;
  default: return -1;
  }
}

/* Walks the pickle at path opcode by opcode: every one is one the viewer
 * reads, a LONG1 holds at most 8 bytes (the older viewer refuses longer
 * ones), and the file ends at its STOP. */
static inline void ol_test_check_viewer_opcodes(const char *path, const char *what)
{
  size_t len;
  unsigned char *p = (unsigned char *)ol_test_read_file(path, &len);
  size_t at = 0, ops = 0;
  bool stopped = false;
  while (at < len && !stopped) {
    long arg = ol_pickle_argument_bytes(p + at, len - at - 1);
    ck_assert_msg(arg >= 0, "%s: opcode 0x%02x at byte %zu: not one of protocol 2's", what, p[at],
                  at);
    ck_assert_msg(ol_viewer_reads(p[at]), "%s: opcode %d ('%c') at byte %zu: PyTorch's viewer "
                  "does not read it", what, p[at], p[at] >= 32 && p[at] < 127 ? p[at] : '?', at);
    ck_assert_msg(p[at] != 0x8a || p[at + 1] <= 8, "%s: a LONG1 of %d bytes", what, p[at + 1]);
    stopped = p[at] == '.';
    at += 1 + (size_t)arg;
    ops++;
  }
  ck_assert_msg(stopped && at == len, "%s: %zu bytes, STOP at %zu", what, len, at);
  ck_assert_uint_gt(ops, 10);
  free(p);
}

#endif
