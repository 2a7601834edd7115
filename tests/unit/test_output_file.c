/* test_output_file.c: the one rule for every file oomlens writes
 * (core/output_file.c): whole or not at all, a new file's mode from the
 * umask or the old file's mode kept, and nothing but a regular file of
 * ours ever replaced: folders, links, FIFOs, sockets, devices, another
 * user's file and the command's own input are refused and left as they
 * were, with nothing else written; a failed write leaves the target
 * untouched and no temporary file; the trace's stream never waits. */
#include <check.h>

#include "check_run.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"

static char dir[OL_TEST_DIR_MAX];

static void make_dir(void)
{
  ol_test_make_dir(dir, sizeof dir, "output-file");
}

static void remove_dir(void)
{
  ck_assert(ol_test_remove_tree(dir));
}

/* dir/name, in a buffer of the caller's. */
static const char *in_dir(char *out, size_t cap, const char *name)
{
  snprintf(out, cap, "%s/%s", dir, name);
  return out;
}

static int count_entries(void)
{
  int n = 0;
  DIR *d = opendir(dir);
  ck_assert_ptr_nonnull(d);
  for (struct dirent *e; (e = readdir(d));)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

static mode_t current_umask(void)
{
  mode_t mask = umask(022);
  umask(mask);
  return mask;
}

/* ---- whole outputs ----------------------------------------------------- */

START_TEST(new_file_whole_with_the_umask)
{
  char path[PATH_MAX], shared[PATH_MAX];
  ol_error_t err;
  ck_assert(ol_output_write_file(in_dir(path, sizeof path, "r.txt"), "first\n", 6,
                                 OL_OUTPUT_PRIVATE, &err));
  ck_assert(ol_output_write_file(in_dir(shared, sizeof shared, "m.prom"), "m 1\n", 4,
                                 OL_OUTPUT_SHARED, &err));
  ol_test_assert_file_text(path, "first\n");
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, OL_OUTPUT_PRIVATE & ~current_umask());
  ck_assert_int_eq(stat(shared, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, OL_OUTPUT_SHARED & ~current_umask());
  ck_assert_int_eq(count_entries(), 2); /* no temporary file left */
}
END_TEST

START_TEST(existing_file_replaced_keeping_its_mode)
{
  char path[PATH_MAX];
  in_dir(path, sizeof path, "r.txt");
  ol_test_write_file(path, "old\n");
  ck_assert_int_eq(chmod(path, 0640), 0);
  ol_error_t err;
  ck_assert_msg(ol_output_write_file(path, "new\n", 4, OL_OUTPUT_PRIVATE, &err), "%s", err.text);
  ol_test_assert_file_text(path, "new\n");
  struct stat st;
  ck_assert_int_eq(stat(path, &st), 0);
  ck_assert_int_eq(st.st_mode & 0777, 0640);
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* Before: rename() replaced the link with the report (README: "replaced,
 * not followed"); the issue asks that a link be refused. */
START_TEST(symlink_refused_link_and_target_kept)
{
  char victim[PATH_MAX], link_path[PATH_MAX], target[PATH_MAX];
  ol_test_write_file(in_dir(victim, sizeof victim, "victim"), "precious\n");
  ck_assert_int_eq(symlink(victim, in_dir(link_path, sizeof link_path, "r.txt")), 0);
  ol_error_t err;
  ck_assert(!ol_output_write_file(link_path, "report\n", 7, OL_OUTPUT_PRIVATE, &err));
  ck_assert_int_eq(err.status, OL_EXIT_USAGE);
  ck_assert_msg(strstr(err.text, "is a symbolic link"), "%s", err.text);
  ol_test_assert_file_text(victim, "precious\n");
  ck_assert_int_gt(readlink(link_path, target, sizeof target), 0);
  ck_assert_int_eq(count_entries(), 2);
}
END_TEST

/* A FIFO is refused without being opened: nothing waits for a reader. */
START_TEST(fifo_refused_without_waiting)
{
  char path[PATH_MAX];
  ck_assert_int_eq(mkfifo(in_dir(path, sizeof path, "r.txt"), 0600), 0);
  ol_error_t err;
  ck_assert(!ol_output_write_file(path, "x", 1, OL_OUTPUT_PRIVATE, &err));
  ck_assert_int_eq(err.status, OL_EXIT_USAGE);
  ck_assert_msg(strstr(err.text, "is a FIFO"), "%s", err.text);
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  ck_assert(S_ISFIFO(st.st_mode));
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* Bound by a name relative to the folder: a socket's path is short. */
START_TEST(socket_refused)
{
  struct sockaddr_un addr = {.sun_family = AF_UNIX, .sun_path = "sock"};
  int here = open(".", O_RDONLY | O_DIRECTORY);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ck_assert_int_ge(here, 0);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(chdir(dir), 0);
  int bound = bind(fd, (struct sockaddr *)&addr, sizeof addr);
  ck_assert_int_eq(fchdir(here), 0);
  close(here);
  ck_assert_int_eq(bound, 0);
  char path[PATH_MAX];
  ol_error_t err;
  ck_assert(!ol_output_write_file(in_dir(path, sizeof path, "sock"), "x", 1, OL_OUTPUT_SHARED,
                                  &err));
  ck_assert_msg(strstr(err.text, "is a socket"), "%s", err.text);
  close(fd);
  struct stat st;
  ck_assert_int_eq(lstat(path, &st), 0);
  ck_assert(S_ISSOCK(st.st_mode));
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* A device is only looked at (lstat): the check never opens it. */
START_TEST(device_refused_by_the_check)
{
  ol_error_t err;
  ck_assert(!ol_output_check("/dev/null", NULL, &err));
  ck_assert_int_eq(err.status, OL_EXIT_USAGE);
  ck_assert_str_eq(err.text, "/dev/null: is a device, not a regular file; refused");
}
END_TEST

/* "dir/", "dir", "/" and "": never a file named ".json" in them. */
START_TEST(folders_and_empty_paths_refused)
{
  char sub[PATH_MAX], slash[PATH_MAX + 2], none[PATH_MAX];
  ck_assert_int_eq(mkdir(in_dir(sub, sizeof sub, "sub"), 0700), 0);
  snprintf(slash, sizeof slash, "%s/", sub);
  const char *paths[] = {sub, slash, "/", "", in_dir(none, sizeof none, "none/")};
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    ol_error_t err;
    ck_assert_msg(!ol_output_write_file(paths[i], "x", 1, OL_OUTPUT_PRIVATE, &err), "%s",
                  paths[i]);
    ck_assert_int_eq(err.status, OL_EXIT_USAGE);
  }
  DIR *d = opendir(sub);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    n++;
  closedir(d);
  ck_assert_int_eq(n, 2); /* . and .. only */
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* The command's input, by its name, a hard link or a link to it. */
START_TEST(an_input_is_refused)
{
  char input[PATH_MAX], hard[PATH_MAX], soft[PATH_MAX], other[PATH_MAX];
  ol_test_write_file(in_dir(input, sizeof input, "in.trace"), "data\n");
  ck_assert_int_eq(link(input, in_dir(hard, sizeof hard, "hard")), 0);
  ck_assert_int_eq(symlink(input, in_dir(soft, sizeof soft, "soft")), 0);
  const char *inputs[] = {input, NULL}, *by_link[] = {soft, NULL};
  ol_error_t err;
  ck_assert(!ol_output_check(input, inputs, &err));
  ck_assert_int_eq(err.status, OL_EXIT_USAGE);
  ck_assert_msg(strstr(err.text, "is this command's input"), "%s", err.text);
  ck_assert(!ol_output_check(hard, inputs, &err));
  ck_assert(!ol_output_check(input, by_link, &err));
  ck_assert(ol_output_check(in_dir(other, sizeof other, "out"), inputs, &err));
  ol_test_assert_file_text(input, "data\n");
}
END_TEST

START_TEST(another_users_file_refused)
{
  ol_error_t err;
  if (geteuid() != 0) { /* a file of root's is another user's */
    ck_assert(!ol_output_check("/etc/passwd", NULL, &err));
    ck_assert_msg(strstr(err.text, "belongs to another user (uid 0)"), "%s", err.text);
    return;
  }
  char path[PATH_MAX];
  ol_test_write_file(in_dir(path, sizeof path, "theirs"), "theirs\n");
  ck_assert_int_eq(chown(path, 65534, 65534), 0);
  ck_assert(!ol_output_write_file(path, "ours\n", 5, OL_OUTPUT_SHARED, &err));
  ck_assert_msg(strstr(err.text, "belongs to another user (uid 65534)"), "%s", err.text);
  ol_test_assert_file_text(path, "theirs\n");
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* A disk that fills up (RLIMIT_FSIZE, SIGXFSZ ignored: EFBIG as ENOSPC
 * would be): the old file is whole and no temporary file is left. In a
 * child, whose limit goes with it. */
static int write_past_the_limit(const char *path)
{
  struct rlimit limit = {4096, 4096};
  signal(SIGXFSZ, SIG_IGN);
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0)
    return 10;
  static char big[65536];
  memset(big, 'x', sizeof big);
  ol_error_t err;
  if (ol_output_write_file(path, big, sizeof big, OL_OUTPUT_SHARED, &err))
    return 11;
  return err.status == OL_EXIT_FAILURE && strstr(err.text, "cannot write") ? 0 : 12;
}

START_TEST(full_disk_leaves_the_old_file)
{
  char path[PATH_MAX];
  ol_test_write_file(in_dir(path, sizeof path, "page.html"), "old page\n");
  fflush(NULL);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0)
    _exit(write_past_the_limit(path));
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  ck_assert_int_eq(WEXITSTATUS(status), 0);
  ol_test_assert_file_text(path, "old page\n");
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

START_TEST(abort_leaves_the_target)
{
  char path[PATH_MAX];
  ol_test_write_file(in_dir(path, sizeof path, "out"), "old\n");
  ol_output_t o;
  ol_error_t err;
  ck_assert(ol_output_begin(&o, path, OL_OUTPUT_SHARED, &err));
  ck_assert(ol_output_write(&o, "half", 4, &err));
  ck_assert_int_eq(count_entries(), 2); /* the temporary file, beside it */
  ol_output_abort(&o);
  ol_output_abort(&o); /* twice is harmless */
  ol_test_assert_file_text(path, "old\n");
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* What appears at the target while it is written is judged at the end:
 * a FIFO is left alone, a regular file of ours replaced. */
START_TEST(what_appears_meanwhile_is_judged_at_the_end)
{
  char path[PATH_MAX];
  in_dir(path, sizeof path, "out");
  ol_output_t o;
  ol_error_t err;
  ck_assert(ol_output_begin(&o, path, OL_OUTPUT_SHARED, &err));
  ck_assert(ol_output_write(&o, "new\n", 4, &err));
  ck_assert_int_eq(mkfifo(path, 0600), 0);
  ck_assert(!ol_output_commit(&o, &err));
  ck_assert_msg(strstr(err.text, "is a FIFO"), "%s", err.text);
  ck_assert_int_eq(count_entries(), 1); /* the FIFO alone */
  ck_assert_int_eq(unlink(path), 0);
  ck_assert(ol_output_begin(&o, path, OL_OUTPUT_SHARED, &err));
  ck_assert(ol_output_write(&o, "new\n", 4, &err));
  ol_test_write_file(path, "someone's\n");
  ck_assert_msg(ol_output_commit(&o, &err), "%s", err.text);
  ol_test_assert_file_text(path, "new\n");
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

START_TEST(long_name_still_gets_a_temporary_file)
{
  char name[256], path[PATH_MAX];
  memset(name, 'n', 250);
  name[250] = '\0';
  ol_error_t err;
  ck_assert_msg(ol_output_write_file(in_dir(path, sizeof path, name), "x", 1, OL_OUTPUT_SHARED,
                                     &err), "%s", err.text);
  ck_assert_int_eq(count_entries(), 1);
}
END_TEST

/* ---- the stream (the trace) -------------------------------------------- */

START_TEST(stream_new_and_existing_file)
{
  char path[PATH_MAX];
  in_dir(path, sizeof path, "t.trace");
  bool created = false;
  ol_error_t err;
  int fd = ol_output_open_stream(path, OL_OUTPUT_PRIVATE, &created, &err);
  ck_assert_msg(fd >= 0, "%s", err.text);
  ck_assert(created);
  ck_assert_int_eq(write(fd, "one\n", 4), 4);
  ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  close(fd);
  fd = ol_output_open_stream(path, OL_OUTPUT_PRIVATE, &created, &err);
  ck_assert_int_ge(fd, 0);
  ck_assert(!created);
  ck_assert_int_eq(write(fd, "2\n", 2), 2);
  close(fd);
  ol_test_assert_file_text(path, "2\n"); /* emptied, then written */
}
END_TEST

START_TEST(stream_refuses_links_folders_and_devices)
{
  char victim[PATH_MAX], link_path[PATH_MAX];
  ol_test_write_file(in_dir(victim, sizeof victim, "victim"), "precious\n");
  ck_assert_int_eq(symlink(victim, in_dir(link_path, sizeof link_path, "t.trace")), 0);
  const char *paths[] = {link_path, dir, "/dev/null"};
  for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
    bool created = false;
    ol_error_t err;
    ck_assert_int_eq(ol_output_open_stream(paths[i], OL_OUTPUT_PRIVATE, &created, &err), -1);
    ck_assert_msg(err.status == OL_EXIT_USAGE, "%s", err.text);
  }
  ol_test_assert_file_text(victim, "precious\n");
  ck_assert_int_eq(count_entries(), 2);
}
END_TEST

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Before: open() without O_NONBLOCK waited for a reader forever. */
START_TEST(stream_fifo_without_reader_refused_at_once)
{
  char path[PATH_MAX];
  ck_assert_int_eq(mkfifo(in_dir(path, sizeof path, "t.fifo"), 0600), 0);
  bool created = true;
  ol_error_t err;
  double start = now_s();
  ck_assert_int_eq(ol_output_open_stream(path, OL_OUTPUT_PRIVATE, &created, &err), -1);
  ck_assert_double_lt(now_s() - start, 1.0);
  ck_assert_msg(strstr(err.text, "is a FIFO no one reads"), "%s", err.text);
  int reader = open(path, O_RDONLY | O_NONBLOCK);
  ck_assert_int_ge(reader, 0);
  int fd = ol_output_open_stream(path, OL_OUTPUT_PRIVATE, &created, &err);
  ck_assert_msg(fd >= 0, "%s", err.text);
  ck_assert(!created);
  ck_assert_int_eq(write(fd, "x\n", 2), 2);
  char got[4] = "";
  ck_assert_int_eq(read(reader, got, sizeof got), 2);
  close(fd);
  close(reader);
}
END_TEST

static Suite *output_file_suite(void)
{
  Suite *s = suite_create("output_file");
  TCase *whole = tcase_create("whole");
  tcase_add_checked_fixture(whole, make_dir, remove_dir);
  tcase_add_test(whole, new_file_whole_with_the_umask);
  tcase_add_test(whole, existing_file_replaced_keeping_its_mode);
  tcase_add_test(whole, symlink_refused_link_and_target_kept);
  tcase_add_test(whole, fifo_refused_without_waiting);
  tcase_add_test(whole, socket_refused);
  tcase_add_test(whole, device_refused_by_the_check);
  tcase_add_test(whole, folders_and_empty_paths_refused);
  tcase_add_test(whole, an_input_is_refused);
  tcase_add_test(whole, another_users_file_refused);
  tcase_add_test(whole, full_disk_leaves_the_old_file);
  tcase_add_test(whole, abort_leaves_the_target);
  tcase_add_test(whole, what_appears_meanwhile_is_judged_at_the_end);
  tcase_add_test(whole, long_name_still_gets_a_temporary_file);
  suite_add_tcase(s, whole);
  TCase *stream = tcase_create("stream");
  tcase_add_checked_fixture(stream, make_dir, remove_dir);
  tcase_add_test(stream, stream_new_and_existing_file);
  tcase_add_test(stream, stream_refuses_links_folders_and_devices);
  tcase_add_test(stream, stream_fifo_without_reader_refused_at_once);
  suite_add_tcase(s, stream);
  return s;
}

int main(void)
{
  return ol_run_suite(output_file_suite());
}
