/* fuzz_json.c: libFuzzer target for the JSON reader (src/analyze/json.c): parsing,
 * every accessor over the whole tree, and path lookups.
 *
 * An input holding a NUL byte is "PATH\0DOCUMENT": the path is looked up
 * as given. Every input also checks ol_json_path against a walk of the
 * tree: the path built from the keys and indexes that reach a node must
 * find that node (when the keys can be named in a path at all). A document
 * that parses is parsed once more with one allocation failing (which one
 * follows from its last byte): the reader must then either succeed or say
 * "out of memory", and leak nothing. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { PATH_CAP = 512 };

static bool nameable(const char *key)
{
  return *key && !strpbrk(key, ".[]");
}

/* Visits every node; path is the way from the root, or "" once it became
 * too long or unnameable (then it is no longer checked). */
static void walk(const ol_json_t *root, const ol_json_t *node, const char *path, bool checked)
{
  if (checked && ol_json_path(root, path) != node)
    __builtin_trap();
  (void)ol_json_string(node);
  (void)ol_json_number(node);
  (void)ol_json_int64(node, NULL);
  (void)ol_json_bool(node, NULL);
  size_t n = ol_json_length(node);
  char sub[PATH_CAP];
  for (size_t i = 0; i < n; i++) {
    int len;
    const ol_json_t *child;
    bool ok = checked;
    if (ol_json_kind(node) == OL_JSON_ARRAY) {
      child = ol_json_at(node, i);
      len = snprintf(sub, sizeof sub, "%s[%zu]", path, i);
    } else {
      const char *key = ol_json_key_at(node, i);
      child = ol_json_value_at(node, i);
      /* Lookups find the first of duplicate keys: check only that one. */
      ok = ok && nameable(key) && ol_json_get(node, key) == child;
      len = snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", key);
    }
    if (!child)
      __builtin_trap();
    walk(root, child, sub, ok && len > 0 && (size_t)len < sizeof sub);
  }
  if (ol_json_at(node, n) || ol_json_value_at(node, n) || ol_json_key_at(node, n))
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  const char *text = (const char *)data;
  const uint8_t *nul = memchr(data, 0, size);
  char path[PATH_CAP] = "";
  size_t skip = 0;
  if (nul) {
    size_t plen = (size_t)(nul - data);
    if (plen >= sizeof path)
      plen = sizeof path - 1;
    memcpy(path, data, plen);
    skip = (size_t)(nul - data) + 1;
  }
  char err[128];
  ol_json_t *root = ol_json_parse(text + skip, size - skip, err, sizeof err);
  if (!root) {
    if (!err[0])
      __builtin_trap(); /* a failure always says why */
    return 0;
  }
  walk(root, root, "", true);
  ol_json_fail_allocation(1 + data[size - 1] % 16u);
  ol_json_t *again = ol_json_parse(text + skip, size - skip, err, sizeof err);
  ol_json_fail_allocation(0);
  if (!again && strcmp(err, "out of memory") != 0)
    __builtin_trap();
  ol_json_free(again);
  if (nul) {
    const ol_json_t *node = ol_json_path(root, path);
    (void)ol_json_kind(node);
    (void)ol_json_path_int64(root, path, -1);
  }
  ol_json_free(root);
  return 0;
}
