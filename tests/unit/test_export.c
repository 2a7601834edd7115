/* test_export.c: `oomlens export` in each format, checked for content:
 * a small trace of ours whose figures are known by construction, and the
 * recorded GPT-2 trace against figures this test computes itself. The
 * memory_viz pickle is loaded by python3's own pickle
 * (tests/check_snapshot.py) and its opcodes are checked against those
 * PyTorch's web viewer reads; the Perfetto JSON is parsed and checked by
 * the trace-event format's rules; the RMM log's columns are read back. */
#include <check.h>
#include <limits.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uthash.h>

#include "check_run.h"
#include "check_pickle.h"
#include "json.h"
#include "core.h"
#include "trace_csv.h"

#define MiB (1ll << 20)

static char dir[OL_TEST_DIR_MAX];
static char path[PATH_MAX], out_path[PATH_MAX], err_path[PATH_MAX];

static void setup(void)
{
  ol_test_make_dir(dir, sizeof dir, "export");
  snprintf(out_path, sizeof out_path, "%s/out", dir);
  snprintf(err_path, sizeof err_path, "%s/err", dir);
}

static void teardown(void)
{
  ck_assert(ol_test_remove_tree(dir));
}

static const char *env(const char *name)
{
  const char *v = getenv(name);
  ck_assert_msg(v && *v, "%s is not set (run with meson test)", name);
  return v;
}

/* Two sites on device 0: weights (1 MiB, kept) and forward (2 MiB and
 * 0.5 MiB live together at the peak of 3.5 MiB, then freed); 1 MiB with
 * no frames; an out-of-memory; 4 KiB on device 1 outside any segment. */
static const char small_trace[] =
  "# oomlens-trace 1 pid=77 rank=0 start_unix_us=1700000000000000 stacks=1\n"
  "# time_us,action,addr,size,stream,site,device\n"
  "device,0,1073741824\n"
  "site,0,0,model.py:10:weights;train.py:5:main\n"
  "site,0,1,model.py:20:forward;train.py:7:main\n"
  "10,segment_alloc,0x1000000,4194304,0,0,0\n"
  "10,alloc,0x1000000,1048576,0,0,0\n"
  "20,alloc,0x1100000,2097152,0,1,0\n"
  "30,alloc,0x1300000,524288,0,1,0\n"
  "40,free_requested,0x1100000,2097152,0,1,0\n"
  "40,free_completed,0x1100000,2097152,0,1,0\n"
  "50,alloc,0x1100000,1048576,0,,0\n"
  "60,free_completed,0x1300000,524288,0,1,0\n"
  "70,oom,0x0,8589934592,0,,0\n"
  "device,1,0\n"
  "80,alloc,0x2000000,4096,5,,1\n"
  "# end events=11\n";

static const char *write_small(void)
{
  snprintf(path, sizeof path, "%s/small.trace", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(small_trace, f);
  fclose(f);
  return path;
}

static const char *data(const char *name)
{
  static char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s", env("OOMLENS_TEST_DATA"), name);
  return p;
}

/* Runs `oomlens export TRACE ARGS -o OUT` with stderr in err_path; the
 * exit status. */
static int export_to(const char *trace, const char *args)
{
  char command[4 * PATH_MAX];
  snprintf(command, sizeof command, "'%s' export '%s' %s -o '%s' 2>'%s'", env("OOMLENS_TEST_CLI"),
           trace, args, out_path, err_path);
  int status = system(command);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void expect_output(const char *trace, const char *args, const char *want)
{
  ck_assert_int_eq(export_to(trace, args), 0);
  char *got = ol_test_read_file(out_path, NULL);
  ck_assert_msg(strcmp(got, want) == 0, "%s:\n%s\nwanted:\n%s", args, got, want);
  free(got);
}

/* ---- folded ------------------------------------------------------------ */

START_TEST(folded_small)
{
  const char *t = write_small();
  /* Sorted by stack, byte by byte, not by bytes. */
  expect_output(t, "--format folded",
                "train.py:5:main;model.py:10:weights 1048576\n"
                "train.py:7:main;model.py:20:forward 2621440\n");
  expect_output(t, "--format folded --by total",
                "[no frames] 1052672\n"
                "train.py:5:main;model.py:10:weights 1048576\n"
                "train.py:7:main;model.py:20:forward 2621440\n");
  expect_output(t, "--format=folded --by=leaked",
                "[no frames] 1052672\n"
                "train.py:5:main;model.py:10:weights 1048576\n");
  expect_output(t, "--format folded --by total --device 1", "[no frames] 4096\n");
}
END_TEST

typedef struct live {
  uint64_t addr, size;
  UT_hash_handle hh;
} live_t;

/* The trace's own figures, computed here the simplest way. */
static void oracle(const char *trace, int64_t *peak, int64_t *total, int64_t *leaked)
{
  ol_error_t err;
  ol_trace_t *t = ol_trace_open(trace, &err);
  ck_assert_msg(t, "%s", err.text);
  live_t *table = NULL, *rec, *tmp;
  int64_t now = 0;
  *peak = *total = 0;
  ol_trace_event_t ev;
  while (ol_trace_next(t, &ev, &err) == 1) {
    if (ev.action == OL_TRACE_ALLOC && ev.size > 0) {
      HASH_FIND(hh, table, &ev.addr, sizeof ev.addr, rec);
      ck_assert_ptr_null(rec); /* the recorded traces never reuse a live address */
      rec = malloc(sizeof *rec);
      rec->addr = ev.addr;
      rec->size = ev.size;
      HASH_ADD(hh, table, addr, sizeof rec->addr, rec);
      now += (int64_t)ev.size;
      *total += (int64_t)ev.size;
      *peak = now > *peak ? now : *peak;
    } else if (ev.action == OL_TRACE_FREE_COMPLETED) {
      HASH_FIND(hh, table, &ev.addr, sizeof ev.addr, rec);
      if (rec) {
        now -= (int64_t)rec->size;
        HASH_DEL(table, rec);
        free(rec);
      }
    }
  }
  *leaked = now;
  HASH_ITER(hh, table, rec, tmp) {
    HASH_DEL(table, rec);
    free(rec);
  }
  ol_trace_close(t);
}

/* Sum of the folded file's byte counts; every line "stack bytes", the
 * stacks in byte order and each once (equal stacks next to each other is
 * what lets every viewer merge them). */
static int64_t folded_sum(void)
{
  FILE *f = fopen(out_path, "r");
  ck_assert_ptr_nonnull(f);
  static char line[65536 + 64], last[65536 + 64];
  int64_t sum = 0;
  last[0] = '\0';
  bool first = true;
  while (fgets(line, sizeof line, f)) {
    char *space = strrchr(line, ' ');
    ck_assert_msg(space && space > line, "no count on '%s'", line);
    sum += strtoll(space + 1, NULL, 10);
    *space = '\0';
    ck_assert_msg(first || strcmp(last, line) < 0, "not sorted: '%.100s' then '%.100s'", last, line);
    first = false;
    strcpy(last, line);
  }
  fclose(f);
  return sum;
}

/* On a real recorded trace each folded view sums to the trace's figure;
 * the peak is GPT-2's known peak (README). */
START_TEST(folded_sums_on_gpt2)
{
  const char *t = data("gpt2.csv.gz");
  int64_t peak, total, leaked;
  oracle(t, &peak, &total, &leaked);
  ck_assert_int_eq(peak, 25379906248ll);
  ck_assert_int_eq(export_to(t, "--format folded"), 0);
  ck_assert_int_eq(folded_sum(), peak);
  ck_assert_int_eq(export_to(t, "--format folded --by total"), 0);
  ck_assert_int_eq(folded_sum(), total);
  ck_assert_int_eq(export_to(t, "--format folded --by leaked"), 0);
  ck_assert_int_eq(folded_sum(), leaked);
  char *text = ol_test_read_file(out_path, NULL); /* outermost first: the script's own frame leads */
  ck_assert_msg(strncmp(text, "[no frames] ", 12) == 0, "%.200s", text);
  ck_assert_msg(strstr(text, "\nworkloads.py:"), "%.200s", text);
  free(text);
}
END_TEST

/* ---- memory_viz -------------------------------------------------------- */

static void check_snapshot(const char *want)
{
  char command[3 * PATH_MAX], summary[512] = "";
  snprintf(command, sizeof command, "python3 '%s' '%s' 2>&1", env("OOMLENS_TEST_CHECK_SNAPSHOT"),
           out_path);
  FILE *p = popen(command, "r");
  ck_assert_ptr_nonnull(p);
  size_t n = fread(summary, 1, sizeof summary - 1, p);
  summary[n] = '\0';
  int status = pclose(p);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", summary);
  ck_assert_msg(strcmp(summary, want) == 0, "got  %swant %s", summary, want);
}

START_TEST(memory_viz_small)
{
  ck_assert_int_eq(export_to(write_small(), "--format memory-viz"), 0);
  /* One segment holding weights, the frameless block and a 2 MiB gap; the
   * device-1 block in a segment of its own. */
  check_snapshot("devices=2 entries=9,1 segments=2 blocks=4 active=2101248 reserved=4198400 "
                 "allocs=5 ooms=1 frames=7\n");
}
END_TEST

/* GPT-2's recorded run: the segments live at its end add up to the
 * reserved peak PyTorch reported (tests/data/README.md). */
START_TEST(memory_viz_gpt2)
{
  ck_assert_int_eq(export_to(data("gpt2.csv.gz"), "--format memory-viz"), 0);
  check_snapshot("devices=1 entries=27291 segments=162 blocks=166 active=68157440 "
                 "reserved=26254245888 allocs=9045 ooms=0 frames=11737\n");
}
END_TEST

/* --max-entries N: each device's last N entries, the segments the same as
 * with all of them. Device 0's last 3 of 9: the frameless alloc, the
 * forward free and the oom. */
START_TEST(memory_viz_last_entries)
{
  const char *t = write_small();
  ck_assert_int_eq(export_to(t, "--format memory-viz --max-entries 3"), 0);
  check_snapshot("devices=2 entries=3,1 segments=2 blocks=4 active=2101248 reserved=4198400 "
                 "allocs=2 ooms=1 frames=1\n");
  char *err = ol_test_read_file(err_path, NULL);
  ck_assert_msg(strstr(err, "kept the last 3 entries of each device, left out 6 earlier ones"),
                "%s", err);
  free(err);
  ck_assert_int_eq(export_to(t, "--format memory-viz --max-entries=0"), 0);
  check_snapshot("devices=2 entries=9,1 segments=2 blocks=4 active=2101248 reserved=4198400 "
                 "allocs=5 ooms=1 frames=7\n");
  ck_assert_int_eq(export_to(t, "--format memory-viz --max-entries 1 --device 0"), 0);
  check_snapshot("devices=1 entries=1 segments=1 blocks=3 active=2097152 reserved=4194304 "
                 "allocs=0 ooms=1 frames=0\n");
  ck_assert_int_eq(export_to(t, "--format memory-viz --max-entries lots"), 2);
  ck_assert_int_eq(export_to(t, "--format memory-viz --max-entries -1"), 2);
}
END_TEST

/* GPT-2's run cut to its last 1000 entries: the segments at the end are
 * those of the whole export (memory_viz_gpt2). */
START_TEST(memory_viz_gpt2_last_entries)
{
  ck_assert_int_eq(export_to(data("gpt2.csv.gz"), "--format memory-viz --max-entries 1000"), 0);
  char command[3 * PATH_MAX], summary[512] = "";
  snprintf(command, sizeof command, "python3 '%s' '%s' 2>&1", env("OOMLENS_TEST_CHECK_SNAPSHOT"),
           out_path);
  FILE *p = popen(command, "r");
  ck_assert_ptr_nonnull(p);
  summary[fread(summary, 1, sizeof summary - 1, p)] = '\0';
  ck_assert_int_eq(pclose(p), 0);
  ck_assert_msg(strstr(summary, "devices=1 entries=1000 segments=162 blocks=166 active=68157440 "
                                "reserved=26254245888 "), "%s", summary);
}
END_TEST

/* Native frames with a source line ("module+0xoffset function (file:line)")
 * become {filename: file, line, name: function} in memory_viz. */
START_TEST(memory_viz_native_source_lines)
{
  snprintf(path, sizeof path, "%s/native.trace", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("# oomlens-trace 1 pid=77 rank=0 start_unix_us=1700000000000000 stacks=1\n"
        "# time_us,action,addr,size,stream,site,device\n"
        "device,0,1073741824\n"
        "site,0,0,prog+0x3f12 weights (prog.c:405);libc.so.6+0x27249 (start.h:58);"
        "prog+0x3490 _start\n"
        "10,alloc,0x1000000,1048576,0,0,0\n", f);
  fclose(f);
  ck_assert_int_eq(export_to(path, "--format memory-viz"), 0);
  char command[3 * PATH_MAX], got[512] = "";
  snprintf(command, sizeof command,
           "python3 -c 'import pickle,sys; s=pickle.load(open(sys.argv[1],\"rb\")); "
           "print([tuple(f.values()) for f in s[\"device_traces\"][0][0][\"frames\"]])' '%s'",
           out_path);
  FILE *p = popen(command, "r");
  ck_assert_ptr_nonnull(p);
  got[fread(got, 1, sizeof got - 1, p)] = '\0';
  ck_assert_int_eq(pclose(p), 0);
  ck_assert_str_eq(got, "[('prog.c', 405, 'weights'), ('start.h', 58, 'libc.so.6+0x27249'), "
                        "('prog+0x3490', 0, '_start')]\n");
}
END_TEST

/* Expandable segments: pages mapped one range at a time, a tensor across
 * several. As PyTorch's snapshot does, a run of contiguous mapped pages is
 * one segment; an unmap may take several ranges or part of one. Here:
 * 0x1000000-0x1800000 mapped in three ranges, then 0x1600000-0x1800000
 * unmapped from inside the last (6 MiB left, holding a 5 MiB tensor);
 * two 2 MiB ranges at 0x3000000 unmapped by one 4 MiB unmap; 6 MiB at
 * 0x4000000 with its middle 2 MiB unmapped (two segments of 2 MiB). The landed export made each range a segment, and
 * the tensor overran its 2 MiB ("blocks do not add up to total_size"). */
START_TEST(memory_viz_mapped_pages)
{
  snprintf(path, sizeof path, "%s/mapped.trace", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("# oomlens-trace 2 pid=77 rank=0 start_unix_us=1700000000000000 stacks=1\n"
        "# time_us,action,addr,size,stream,site,device\n"
        "device,0,1073741824\n"
        "site,0,0,model.py:10:weights;train.py:5:main\n"
        "10,segment_map,0x1000000,2097152,0,,0\n"
        "11,segment_map,0x1200000,2097152,0,,0\n"
        "12,segment_map,0x1400000,4194304,0,,0\n"
        "13,alloc,0x1000000,5242880,0,0,0\n"
        "14,segment_unmap,0x1600000,2097152,0,,0\n"
        "15,segment_map,0x3000000,2097152,0,,0\n"
        "16,segment_map,0x3200000,2097152,0,,0\n"
        "17,segment_unmap,0x3000000,4194304,0,,0\n"
        "18,segment_map,0x4000000,6291456,0,,0\n"
        "19,segment_unmap,0x4200000,2097152,0,,0\n"
        "# end events=10\n", f);
  fclose(f);
  ck_assert_int_eq(export_to(path, "--format memory-viz"), 0);
  check_snapshot("devices=1 entries=10 segments=3 blocks=4 active=5242880 reserved=10485760 "
                 "allocs=1 ooms=0 frames=1\n");
}
END_TEST

/* A trace the library wrote under --manage (its pool maps 2 MiB pages):
 * the segments hold their tensors, and add up to what was mapped at the
 * end (the trace's maps less its unmaps, 11 of them). */
START_TEST(memory_viz_manage_trace)
{
  ck_assert_int_eq(export_to(data("oom/gpt2_batch.trace.xz"), "--format memory-viz"), 0);
  check_snapshot("devices=1 entries=6224 segments=2 blocks=408 active=11520235520 "
                 "reserved=11525947392 allocs=503 ooms=1 frames=706\n");
}
END_TEST

/* ---- memory_viz in PyTorch's web viewer --------------------------------- */

static void check_viewer_opcodes(const char *what)
{
  ol_test_check_viewer_opcodes(out_path, what);
}

/* Every shared trace's export, and one of our format's, in the opcodes the
 * viewer reads (the landed build wrote POP 27,327 times for GPT-2). */
START_TEST(memory_viz_opcodes_the_viewer_reads)
{
  static const char *const traces[] = {"gpt2.csv.gz", "gpt2_varlen.csv.gz", "resnet50.csv.gz",
                                       "frag.csv.gz", "oom_params.csv.gz", "oom_activations.csv.gz"};
  for (size_t i = 0; i < sizeof traces / sizeof *traces; i++) {
    ck_assert_int_eq(export_to(data(traces[i]), "--format memory-viz"), 0);
    check_viewer_opcodes(traces[i]);
  }
  ck_assert_int_eq(export_to(write_small(), "--format memory-viz"), 0);
  check_viewer_opcodes("small");
  ck_assert_int_eq(export_to(write_small(), "--format memory-viz --max-entries 2"), 0);
  check_viewer_opcodes("small, last 2");
}
END_TEST

/* python3 prints EXPR of the snapshot in out_path, loaded as s. */
static void expect_python(const char *expr, const char *want)
{
  char command[4 * PATH_MAX], got[512] = "";
  snprintf(command, sizeof command,
           "python3 -c 'import pickle,sys; s=pickle.load(open(sys.argv[1],\"rb\")); print(%s)' '%s'",
           expr, out_path);
  FILE *p = popen(command, "r");
  ck_assert_ptr_nonnull(p);
  got[fread(got, 1, sizeof got - 1, p)] = '\0';
  ck_assert_int_eq(pclose(p), 0);
  ck_assert_msg(strcmp(got, want) == 0, "%s: got %s want %s", expr, got, want);
}

#define OOM_ENTRIES "[(e[\"time_us\"], e[\"device_free\"]) for e in s[\"device_traces\"][0] if e[\"action\"]==\"oom\"]"

/* Entries carry the wall clock (the viewer dates the run by it): the
 * trace's start_unix_us plus the event's offset; an OOM the device's free
 * memory: its size less what was reserved where the trace has no
 * oom_context, what the oom_context says where it has one, -1 (unknown)
 * where the trace does not know the size. */
START_TEST(memory_viz_wall_clock_and_free_memory)
{
  ck_assert_int_eq(export_to(write_small(), "--format memory-viz"), 0);
  expect_python("s[\"device_traces\"][0][0][\"time_us\"], s[\"device_traces\"][1][0][\"time_us\"]",
                "1700000000000010 1700000000000080\n");
  expect_python(OOM_ENTRIES, "[(1700000000000070, 1069547520)]\n");
  snprintf(path, sizeof path, "%s/context.trace", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs("# oomlens-trace 2 pid=77 rank=0 start_unix_us=1700000000000000 stacks=1\n"
        "# time_us,action,addr,size,stream,site,device\n"
        "device,0,1073741824\n"
        "10,segment_alloc,0x1000000,4194304,0,,0\n"
        "70,oom,0x0,8589934592,0,,0\n"
        "oom_context,0,request=8589934592 capacity=1073741824 free=536870912 class=impossible\n"
        "80,oom,0x0,4294967296,0,,0\n", f);
  fclose(f);
  ck_assert_int_eq(export_to(path, "--format memory-viz"), 0);
  check_viewer_opcodes("context");
  expect_python(OOM_ENTRIES, "[(1700000000000070, 536870912), (1700000000000080, 1069547520)]\n");
  ck_assert_int_eq(export_to(data("oom_params.csv.gz"), "--format memory-viz"), 0);
  expect_python("set(e[\"device_free\"] for e in s[\"device_traces\"][0] if e[\"action\"]==\"oom\"), "
                "s[\"device_traces\"][0][0][\"time_us\"] > 1700000000000000",
                "{-1} True\n");
}
END_TEST

/* ---- Perfetto ------------------------------------------------------------ */

/* The trace-event format's rules (Google's "Trace Event Format" document,
 * which catapult's importer and Perfetto's JSON importer follow): each
 * counter event ("C") is a track named by its name within its pid, each of
 * its args a series of that track, drawn stacked on the others; so
 * allocated and reserved are two counters of one arg each, never two args
 * of one (reserved read as allocated + reserved). Perfetto keeps pid 0 for
 * itself: no event has it. */
START_TEST(perfetto_small)
{
  ck_assert_int_eq(export_to(write_small(), "--format perfetto"), 0);
  ol_error_t err;
  ol_json_t *root = ol_json_parse_file(out_path, &err);
  ck_assert_msg(root, "%s", err.text);
  const ol_json_t *events = ol_json_get(root, "traceEvents");
  ck_assert_int_eq(ol_json_kind(events), OL_JSON_ARRAY);
  int allocated = 0, reserved = 0, names = 0, ooms = 0;
  int64_t max_allocated = 0, last_ts = -1;
  for (size_t i = 0; i < ol_json_length(events); i++) {
    const ol_json_t *e = ol_json_at(events, i);
    const char *ph = ol_json_string(ol_json_get(e, "ph"));
    const char *name = ol_json_string(ol_json_get(e, "name"));
    ck_assert_ptr_nonnull(ph);
    ck_assert_ptr_nonnull(name);
    ck_assert_int_ge(ol_json_path_int64(e, "pid", -1), 1);
    if (strcmp(ph, "M") == 0) {
      names++;
      ck_assert_str_eq(name, "process_name");
      continue;
    }
    int64_t ts = ol_json_path_int64(e, "ts", -1);
    ck_assert_int_ge(ts, 0);
    if (strcmp(ph, "C") == 0) {
      const ol_json_t *args = ol_json_get(e, "args");
      ck_assert_int_eq(ol_json_kind(args), OL_JSON_OBJECT);
      ck_assert_msg(ol_json_length(args) == 1, "counter %s has %zu series", name,
                    ol_json_length(args));
      int64_t bytes = ol_json_path_int64(e, "args.bytes", -1);
      ck_assert_int_ge(bytes, 0);
      ck_assert_int_ge(ts, last_ts);
      last_ts = ts;
      if (strcmp(name, "allocated") == 0) {
        allocated++;
        max_allocated = bytes > max_allocated ? bytes : max_allocated;
      } else {
        ck_assert_str_eq(name, "reserved");
        reserved++;
        ck_assert_int_eq(ol_json_path_int64(e, "pid", -1), 1); /* device 0 has segments */
        if (ts == 10) /* segment and block at one moment: one sample, after both */
          ck_assert_int_eq(bytes, 4194304);
      }
    } else {
      ck_assert_str_eq(ph, "I"); /* the phase DevTools' trace engine reads too */
      ooms++;
      ck_assert_int_eq(ol_json_path_int64(e, "args.request", -1), 8589934592ll);
      ck_assert_int_eq(ol_json_path_int64(e, "args.allocated", -1), 2 * MiB);
      ck_assert_int_eq(ts, 70);
    }
  }
  ck_assert_int_eq(names, 2);     /* cuda:0 and cuda:1, pids 1 and 2 */
  ck_assert_int_eq(allocated, 7); /* moments 10, 20, 30, 40, 50, 60 and device 1's 80 */
  ck_assert_int_eq(reserved, 6);  /* device 0's moments; device 1 shows no segment */
  ck_assert_int_eq(ooms, 1);
  ck_assert_int_eq(max_allocated, 3 * MiB + MiB / 2);
  ol_json_free(root);
}
END_TEST

/* ---- RMM ------------------------------------------------------------------ */

START_TEST(rmm_small)
{
  expect_output(write_small(), "--format rmm-csv",
                "Thread,Time,Action,Pointer,Size,Stream\n"
                "77,22:13:20.000010,allocate,0x1000000,1048576,0x0\n"
                "77,22:13:20.000020,allocate,0x1100000,2097152,0x0\n"
                "77,22:13:20.000030,allocate,0x1300000,524288,0x0\n"
                "77,22:13:20.000040,free,0x1100000,2097152,0x0\n"
                "77,22:13:20.000050,allocate,0x1100000,1048576,0x0\n"
                "77,22:13:20.000060,free,0x1300000,524288,0x0\n"
                "77,22:13:20.000070,allocate failure,0x0,8589934592,0x0\n"
                "77,22:13:20.000080,allocate,0x2000000,4096,0x5\n");
}
END_TEST

/* Every row has RMM's six columns; its own running sum reaches the peak. */
START_TEST(rmm_gpt2_columns)
{
  const char *t = data("gpt2.csv.gz");
  int64_t peak, total, leaked;
  oracle(t, &peak, &total, &leaked);
  ck_assert_int_eq(export_to(t, "--format rmm-csv"), 0);
  FILE *f = fopen(out_path, "r");
  ck_assert_ptr_nonnull(f);
  char line[256];
  ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
  ck_assert_str_eq(line, "Thread,Time,Action,Pointer,Size,Stream\n");
  int64_t now = 0, high = 0;
  long rows = 0;
  while (fgets(line, sizeof line, f)) {
    long thread;
    unsigned hh, mm, ss, us;
    char action[16];
    unsigned long long pointer, size, stream;
    int fields = sscanf(line, "%ld,%2u:%2u:%2u.%6u,%15[a-z],0x%llx,%llu,0x%llx", &thread, &hh, &mm,
                        &ss, &us, action, &pointer, &size, &stream);
    if (fields != 9 || hh > 23 || mm > 59 || ss > 59)
      ck_abort_msg("row %ld: %s", rows, line);
    if (strcmp(action, "allocate") == 0)
      now += (int64_t)size;
    else if (strcmp(action, "free") == 0)
      now -= (int64_t)size;
    else
      ck_abort_msg("action %s", action);
    high = now > high ? now : high;
    rows++;
  }
  fclose(f);
  ck_assert_int_eq(high, peak);
  ck_assert_int_eq(now, leaked);
}
END_TEST

/* ---- replay of our format ---------------------------------------------------- */

static ol_json_t *replay_json(const char *trace, const char *args)
{
  char command[4 * PATH_MAX];
  ol_error_t err;
  snprintf(command, sizeof command, "'%s' replay '%s' --json %s >'%s' 2>'%s'",
           env("OOMLENS_TEST_CLI"), trace, args, out_path, err_path);
  int status = system(command);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "replay %s failed", args);
  ol_json_t *root = ol_json_parse_file(out_path, &err);
  ck_assert_msg(root, "%s", err.text);
  return root;
}

/* Our trace replays as the CSV does, on the device size it names unless
 * told otherwise, one device at a time if asked. */
START_TEST(replay_reads_our_trace)
{
  const char *t = write_small();
  ol_json_t *r = replay_json(t, "");
  ck_assert_int_eq(ol_json_path_int64(r, "capacity", -1), 1073741824);
  ck_assert_int_eq(ol_json_path_int64(r, "peak_allocated", -1), 3 * MiB + MiB / 2);
  /* The recorded 8 GiB request cannot fit the 1 GiB device either; the
   * job went on (device 1's request, counted on the one replayed device),
   * and so does the replay, to the end. */
  ck_assert_int_eq(ol_json_path_int64(r, "oom.size", -1), 8589934592ll);
  ck_assert_int_eq(ol_json_path_int64(r, "events", -1), 10);
  ck_assert_int_eq(ol_json_path_int64(r, "allocs", -1), 5);
  ol_json_free(r);
  /* Device 0 alone ends with its OOM: the replay stops there, at its 9th
   * event, after 4 allocations. */
  r = replay_json(t, "--device 0");
  ck_assert_int_eq(ol_json_path_int64(r, "oom.size", -1), 8589934592ll);
  ck_assert_int_eq(ol_json_path_int64(r, "events", -1), 9);
  ck_assert_int_eq(ol_json_path_int64(r, "allocs", -1), 4);
  ol_json_free(r);
  r = replay_json(t, "--capacity 16G --device 1");
  ck_assert_int_eq(ol_json_path_int64(r, "events", -1), 1);
  ck_assert_int_eq(ol_json_path_int64(r, "peak_allocated", -1), 4096);
  ck_assert_int_eq(ol_json_kind(ol_json_path(r, "oom")), OL_JSON_NULL);
  ol_json_free(r);
}
END_TEST

/* ---- the command ------------------------------------------------------------ */

START_TEST(usage_and_input_errors)
{
  const char *t = write_small();
  ck_assert_int_eq(export_to(t, "--format svg"), 2);
  ck_assert_int_eq(export_to(t, ""), 2);
  ck_assert_int_eq(export_to(t, "--format folded --by median"), 2);
  ck_assert_int_eq(export_to(t, "--format folded --device 64"), 2);
  /* A malformed line: named with its line, exit 2, no output left behind. */
  FILE *f = fopen(path, "a");
  fputs("90,alloc,0x1,1,0,9,0\n", f);
  fclose(f);
  ck_assert_int_eq(export_to(t, "--format folded"), 2);
  char *err = ol_test_read_file(err_path, NULL);
  ck_assert_msg(strstr(err, "small.trace:18: site '9' of device 0 is not defined"), "%s", err);
  free(err);
  ck_assert_int_ne(access(out_path, F_OK), 0);
}
END_TEST

/* Before: --by with perfetto (or memory-viz, rmm-csv) and --max-entries
 * with folded were ignored without a word, and --device 7 on a trace
 * without it wrote an empty export, exit 0. */
START_TEST(flags_of_another_format_are_errors)
{
  const char *t = write_small();
  static const struct {
    const char *args, *message;
  } cases[] = {
    {"--format perfetto --by peak", "--by (folded only) does not apply to --format perfetto"},
    {"--format memory-viz --by total", "--by (folded only) does not apply to --format memory-viz"},
    {"--format rmm-csv --by leaked", "--by (folded only) does not apply to --format rmm-csv"},
    {"--format folded --max-entries 3",
     "--max-entries (memory-viz only) does not apply to --format folded"},
    {"--format perfetto --max-entries 0", "--max-entries (memory-viz only) does not apply"},
    {"--format rmm-csv --max-entries=10", "--max-entries (memory-viz only) does not apply"},
    {"--format folded --device 7", "small.trace: no event of device 7 (its events are on device 0"},
    {"--format memory-viz --device 7", "no event of device 7"},
    {"--format perfetto --device 7", "no event of device 7"},
    {"--format rmm-csv --device 7", "no event of device 7"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    ck_assert_int_eq(export_to(t, cases[i].args), 2);
    char *err = ol_test_read_file(err_path, NULL);
    ck_assert_msg(strstr(err, cases[i].message) && strncmp(err, "oomlens export: ", 16) == 0,
                  "%s: %s", cases[i].args, err);
    free(err);
  }
  /* where they apply, they still work */
  ck_assert_int_eq(export_to(t, "--format folded --by total"), 0);
  ck_assert_int_eq(export_to(t, "--format memory-viz --max-entries 2"), 0);
  ck_assert_int_eq(export_to(t, "--format perfetto --device 0"), 0);
}
END_TEST

/* The exit status is the error's: 1 for our own failure (the output cannot
 * be written), 2 for a bad input file, whatever the messages say (a trace
 * named "cannot write" is still a bad input file). */
START_TEST(status_from_the_error)
{
  const char *t = write_small();
  char command[4 * PATH_MAX];
  snprintf(command, sizeof command,
           "'%s' export '%s' --format=folded --output='%s/no/dir/x' 2>'%s'",
           env("OOMLENS_TEST_CLI"), t, dir, err_path);
  int status = system(command);
  ck_assert(WIFEXITED(status));
  ck_assert_int_eq(WEXITSTATUS(status), 1);
  char *err = ol_test_read_file(err_path, NULL);
  ck_assert_msg(strstr(err, "oomlens export: ") == err
                  && strstr(err, "/no/dir/x: cannot create a temporary file in its folder"),
                "%s", err);
  free(err);
  char named[PATH_MAX];
  snprintf(named, sizeof named, "%s/cannot write.trace", dir);
  FILE *f = fopen(named, "w");
  ck_assert_ptr_nonnull(f);
  fputs(small_trace, f);
  fputs("90,alloc,0x1,1,0,9,0\n", f);
  fclose(f);
  ck_assert_int_eq(export_to(named, "--format=perfetto --device=0"), 2);
  err = ol_test_read_file(err_path, NULL);
  ck_assert_msg(strstr(err, "cannot write.trace:18: site '9' of device 0 is not defined"), "%s",
                err);
  free(err);
  ck_assert_int_eq(export_to(t, "--format=perfetto --max-entries=x"), 2);
  err = ol_test_read_file(err_path, NULL);
  ck_assert_msg(strstr(err, "bad value 'x' for --max-entries"), "%s", err);
  free(err);
}
END_TEST

/* Not a terminal: not a byte of progress on stderr. */
START_TEST(quiet_when_not_a_terminal)
{
  ck_assert_int_eq(export_to(data("gpt2.csv.gz"), "--format perfetto"), 0);
  char *err = ol_test_read_file(err_path, NULL);
  ck_assert_str_eq(err, "");
  free(err);
}
END_TEST

/* On a terminal the percentage is shown, then wiped. */
START_TEST(progress_on_a_terminal)
{
  int master;
  pid_t pid = forkpty(&master, NULL, NULL, NULL);
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    execl(env("OOMLENS_TEST_CLI"), "oomlens", "export", data("gpt2.csv.gz"), "--format", "folded",
          "-o", out_path, (char *)NULL);
    _exit(127);
  }
  char seen[4096];
  size_t len = 0;
  ssize_t n;
  while (len < sizeof seen - 1 && (n = read(master, seen + len, sizeof seen - 1 - len)) > 0)
    len += (size_t)n;
  seen[len] = '\0';
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  close(master);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ck_assert_msg(strstr(seen, "oomlens export: 100%"), "%s", seen);
}
END_TEST

/* ---- sizes at the end of the range ------------------------------------ */

/* Blocks of 2^63 - 1 bytes, two live at once, segments mapped and
 * unmapped, an OOM whose context line says 2^64 - 1: a crafted trace
 * whose sums pass INT64_MAX everywhere. */
static const char *const huge_traces[] = {
  "# oomlens-trace 2 pid=1 rank=0 start_unix_us=1 stacks=1\n"
  "# time_us,action,addr,size,stream,site,device\n"
  "site,0,0,a.py:1:f\n"
  "device,0,18446744073709551615\n"
  "1,segment_map,0x1000,9223372036854775807,0,,0\n"
  "2,alloc,0x1000,9223372036854775807,0,0,0\n"
  "3,segment_map,0x80001000,9223372036854775807,0,,0\n"
  "4,alloc,0x80001000,9223372036854775807,0,0,0\n"
  "5,free_requested,0x1000,9223372036854775807,0,0,0\n"
  "6,free_completed,0x1000,9223372036854775807,0,0,0\n"
  "7,segment_unmap,0x1000,9223372036854775807,0,,0\n"
  "8,oom,0x0,9223372036854775807,0,0,0\n"
  "oom_context,0,request=18446744073709551615 capacity=9223372036854775807 free=-1 "
  "external=9223372036854775807 free_reserved=9223372036854775807 largest_free_block=-1 "
  "self_device_bytes=9223372036854775807 batch=9223372036854775807 segments_only=0 managed=0 "
  "class=impossible\n"
  "# end events=8\n",
  "# time_us,action,addr,size,stream,frames\n"
  "1,segment_alloc,0x1000,9223372036854775807,0,a.py:1:f\n"
  "2,alloc,0x1000,9223372036854775807,0,a.py:1:f\n"
  "3,segment_alloc,0x90000000,9223372036854775807,0,b.py:1:g\n"
  "4,alloc,0x90000000,9223372036854775807,0,b.py:1:g\n"
  "5,free_requested,0x1000,9223372036854775807,0,a.py:1:f\n"
  "6,free_completed,0x1000,9223372036854775807,0,a.py:1:f\n"
  "7,segment_free,0x1000,9223372036854775807,0,a.py:1:f\n"
  "8,oom,0x0,9223372036854775807,0,a.py:1:f\n",
};

static int cli(const char *args)
{
  char command[8 * PATH_MAX];
  snprintf(command, sizeof command, "'%s' %s >'%s' 2>'%s'", env("OOMLENS_TEST_CLI"), args,
           out_path, err_path);
  int status = system(command);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* The trace with every figure past int64 replaced by the largest a trace
 * may hold (2^56 bytes, the readers' bound). */
static void write_at_the_limit(const char *text, const char *to)
{
  static const char *const past[] = {"18446744073709551615", "9223372036854775807"};
  FILE *f = fopen(to, "w");
  ck_assert_ptr_nonnull(f);
  for (const char *at = text; *at;) {
    size_t n = 0;
    for (size_t i = 0; i < sizeof past / sizeof *past && !n; i++)
      if (!strncmp(at, past[i], strlen(past[i])))
        n = strlen(past[i]);
    if (n) {
      fputs("72057594037927936", f);
      at += n;
    } else {
      fputc(*at++, f);
    }
  }
  fclose(f);
}

/* Figures past int64 are refused with the line that holds them (exit 2),
 * and at the largest a trace may hold every format, replay (each policy),
 * report and its HTML page read it without a signed overflow (the
 * sanitizer pass stops at one: were the account's and the sites' sums, the
 * iteration finder's level, the OOM rules). */
START_TEST(sums_past_int64_in_every_command)
{
  snprintf(path, sizeof path, "%s/huge-%d.trace", dir, _i);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(huge_traces[_i], f);
  fclose(f);
  char args[3 * PATH_MAX];
  snprintf(args, sizeof args, "export '%s' --format folded", path);
  ck_assert_int_eq(cli(args), 2);
  char *said = ol_test_read_file(err_path, NULL);
  ck_assert_msg(strstr(said, "is out of range"), "%s", said);
  free(said);
  write_at_the_limit(huge_traces[_i], path);
  static const char *const formats[] = {"folded", "folded --by total", "folded --by leaked",
                                        "memory-viz", "perfetto", "rmm-csv"};
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
    char format[64];
    snprintf(format, sizeof format, "--format %s", formats[i]);
    ck_assert_msg(export_to(path, format) == 0, "export %s", formats[i]);
  }
  static const char *const after[] = {"", "--policy oomlens",
                                      "--policy pytorch-expandable --capacity 16G"};
  for (size_t i = 0; i < sizeof after / sizeof *after; i++) {
    snprintf(args, sizeof args, "replay '%s' %s", path, after[i]);
    ck_assert_msg(cli(args) == 0, "%s: %s", args, ol_test_read_file(err_path, NULL));
  }
  snprintf(args, sizeof args, "report '%s'", path);
  ck_assert_msg(cli(args) == 0, "%s: %s", args, ol_test_read_file(err_path, NULL));
  snprintf(args, sizeof args, "report '%s' --html '%s.html'", path, path);
  ck_assert_msg(cli(args) == 0, "%s: %s", args, ol_test_read_file(err_path, NULL));
}
END_TEST

static Suite *export_suite(void)
{
  Suite *s = suite_create("export");
  TCase *formats = tcase_create("formats");
  tcase_add_checked_fixture(formats, setup, teardown);
  tcase_set_timeout(formats, 120);
  tcase_add_test(formats, folded_small);
  tcase_add_test(formats, folded_sums_on_gpt2);
  tcase_add_test(formats, memory_viz_small);
  tcase_add_test(formats, memory_viz_gpt2);
  tcase_add_test(formats, memory_viz_last_entries);
  tcase_add_test(formats, memory_viz_gpt2_last_entries);
  tcase_add_test(formats, memory_viz_native_source_lines);
  tcase_add_test(formats, memory_viz_mapped_pages);
  tcase_add_test(formats, memory_viz_manage_trace);
  tcase_add_test(formats, memory_viz_opcodes_the_viewer_reads);
  tcase_add_test(formats, memory_viz_wall_clock_and_free_memory);
  tcase_add_test(formats, perfetto_small);
  tcase_add_test(formats, rmm_small);
  tcase_add_test(formats, rmm_gpt2_columns);
  tcase_add_test(formats, replay_reads_our_trace);
  tcase_add_loop_test(formats, sums_past_int64_in_every_command, 0,
                      sizeof huge_traces / sizeof *huge_traces);
  suite_add_tcase(s, formats);
  TCase *cli = tcase_create("command");
  tcase_add_checked_fixture(cli, setup, teardown);
  tcase_set_timeout(cli, 60);
  tcase_add_test(cli, usage_and_input_errors);
  tcase_add_test(cli, flags_of_another_format_are_errors);
  tcase_add_test(cli, status_from_the_error);
  tcase_add_test(cli, quiet_when_not_a_terminal);
  tcase_add_test(cli, progress_on_a_terminal);
  suite_add_tcase(s, cli);
  return s;
}

int main(void)
{
  return ol_run_suite(export_suite());
}
