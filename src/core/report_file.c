/* report_file.c: where reports go: the paths' patterns (%p, %r), a forked
 * child's own name, the JSON beside the text, and the text and JSON
 * written as one output (output_file.c's rule for each: whole or not at
 * all, never over anything but a regular file of ours). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* The rank from the launcher's environment; only safe characters, so a
 * strange value cannot steer the path elsewhere. */
const char *ol_rank_text(void)
{
  static const char *const vars[] = {"RANK", "LOCAL_RANK"};
  for (size_t i = 0; i < 2; i++) {
    const char *value = getenv(vars[i]);
    if (!value || !*value || strlen(value) > 16)
      continue;
    bool safe = true;
    for (const char *c = value; *c; c++)
      if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')
            || *c == '_' || *c == '-'))
        safe = false;
    if (safe)
      return value;
  }
  return "0";
}

/* %p: pid, %r: rank, %%: a percent sign; any other % is kept as it is.
 * Returns 0, or -1 when the result does not fit. */
int ol_expand_path(const char *pattern, long pid, const char *rank, char *out, size_t cap)
{
  size_t len = 0;
  for (const char *c = pattern; *c; c++) {
    char piece[32];
    const char *add = piece;
    if (c[0] == '%' && c[1] == 'p') {
      snprintf(piece, sizeof piece, "%ld", pid);
      c++;
    } else if (c[0] == '%' && c[1] == 'r') {
      add = rank;
      c++;
    } else if (c[0] == '%' && c[1] == '%') {
      piece[0] = '%', piece[1] = '\0';
      c++;
    } else {
      piece[0] = *c, piece[1] = '\0';
    }
    size_t n = strlen(add);
    if (len + n + 1 > cap)
      return -1;
    memcpy(out + len, add, n);
    len += n;
  }
  if (cap == 0)
    return -1;
  out[len] = '\0';
  return 0;
}

/* Where a process writes a file named by an OOMLENS_* pattern. A forked
 * child must never write over its parent's file: when the pattern has no
 * %p, the child's pid is added, before keep_ext if the name ends with it
 * (x.prom -> x.<pid>.prom, still a file the collector reads), else at the
 * end (x.txt -> x.txt.<pid>). 0, or -1 when the path does not fit. */
int ol_output_path(const char *pattern, long pid, const char *rank, bool forked_child,
                   const char *keep_ext, char *out, size_t cap)
{
  if (ol_expand_path(pattern, pid, rank, out, cap) != 0)
    return -1;
  if (!forked_child || strstr(pattern, "%p"))
    return 0;
  size_t len = strlen(out), ext = keep_ext ? strlen(keep_ext) : 0;
  size_t stem = ext && len >= ext && strcmp(out + len - ext, keep_ext) == 0 ? len - ext : len;
  char tail[32];
  snprintf(tail, sizeof tail, "%s", out + stem);
  int n = snprintf(out + stem, cap - stem, ".%ld%s", pid, tail);
  return n < 0 || (size_t)n >= cap - stem ? -1 : 0;
}

/* The JSON report sits beside the text one: x.txt gives x.json, anything
 * else gets .json appended. */
int ol_json_path_for(const char *text_path, char *out, size_t cap)
{
  size_t len = strlen(text_path);
  size_t stem = len >= 4 && strcmp(text_path + len - 4, ".txt") == 0 ? len - 4 : len;
  if (stem + sizeof ".json" > cap)
    return -1;
  memcpy(out, text_path, stem);
  memcpy(out + stem, ".json", sizeof ".json");
  return 0;
}

/* Both files checked, both written to their temporary files, then both
 * published: a refusal or a failed write leaves neither behind. */
bool ol_report_files_write(const char *text_path, const ol_buf_t *text, const ol_buf_t *json,
                           ol_error_t *err)
{
  char json_path[OL_OUTPUT_TEMP_MAX];
  if (json && ol_json_path_for(text_path, json_path, sizeof json_path) != 0) {
    ol_fail(err, OL_EXIT_USAGE, "%s: too long a path for the JSON beside it", text_path);
    return false;
  }
  if (!ol_output_check(text_path, NULL, err) || (json && !ol_output_check(json_path, NULL, err)))
    return false;
  ol_output_t t, j;
  if (!ol_output_begin(&t, text_path, OL_OUTPUT_PRIVATE, err)
      || !ol_output_write(&t, text->data, text->len, err))
    return false;
  if (json && !(ol_output_begin(&j, json_path, OL_OUTPUT_PRIVATE, err)
                && ol_output_write(&j, json->data, json->len, err))) {
    ol_output_abort(&t);
    return false;
  }
  if (!ol_output_commit(&t, err)) {
    if (json)
      ol_output_abort(&j);
    return false;
  }
  return !json || ol_output_commit(&j, err);
}
