/* json.h: a small, strict, bounded JSON reader (RFC 8259), for reading back
 * the reports oomlens writes (`oomlens merge`, `oomlens report`, the tests).
 *
 * ol_json_parse() builds an immutable tree whose memory is all owned by
 * its root; ol_json_free(root) releases all of it at once. Nodes
 * handed out by the accessors belong to that tree: never free them on their
 * own, and do not use them after the root is freed. A finished tree is only
 * read, so any number of threads may read it at once.
 *
 * Strict: exactly one value, no comments, no trailing commas, no leading
 * zeros, no control characters or invalid UTF-8, only the escapes RFC 8259
 * lists, surrogate pairs decoded to UTF-8. Bounded: nesting deeper than
 * OL_JSON_MAX_DEPTH is an error, so the stack use is fixed whatever the
 * input; every allocation failure gives NULL and "out of memory". */
#ifndef OL_JSON_H
#define OL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OL_JSON_MAX_DEPTH 64                   /* arrays and objects, counted from 1 */
#define OL_JSON_MAX_FILE ((size_t)256 << 20)   /* ol_json_parse_file refuses bigger */

typedef struct ol_json ol_json_t;
typedef struct ol_error ol_error_t; /* core.h */

typedef enum ol_json_kind {
  OL_JSON_NONE = 0, /* no node: what ol_json_kind(NULL) gives, never in a tree */
  OL_JSON_NULL,
  OL_JSON_BOOL,
  OL_JSON_NUMBER,
  OL_JSON_STRING,
  OL_JSON_ARRAY,
  OL_JSON_OBJECT,
} ol_json_kind_t;

/* Parses len bytes of text (no NUL terminator needed). Returns the root, or
 * NULL with a one-line message in err, e.g.
 *   "line 3, column 14: expected ':' after an object key, found '}'"
 * Lines and columns count from 1; a column counts characters (UTF-8
 * sequences), not bytes. err may be NULL or err_cap 0 when no message is
 * wanted; a message that does not fit is cut short, always NUL-terminated.
 * On success err holds "". Duplicate keys are kept; lookups find the first. */
ol_json_t *ol_json_parse(const char *text, size_t len, char *err, size_t err_cap);

/* Reads and parses a whole file (gzip'd or plain), for the command line: NULL with the error
 * in err (NULL: none wanted), whose messages name the path: "cannot open
 * P: <strerror>", "cannot read P: <strerror>", "P is over the 256 MiB
 * limit", "P: line L, column C: ..." (status OL_EXIT_USAGE: a bad input
 * file), "P: out of memory" (OL_EXIT_FAILURE). On success err is cleared. */
ol_json_t *ol_json_parse_file(const char *path, ol_error_t *err);

/* Frees the tree of a root from ol_json_parse*(); NULL is fine. Passing a
 * node that is not a root does nothing. */
void ol_json_free(ol_json_t *root);

/* Accessors: every one accepts NULL and a node of the wrong kind, giving
 * NULL, false or 0, so lookups chain without checks in between. */
ol_json_kind_t ol_json_kind(const ol_json_t *node);

/* Arrays: element count. Objects: member count. Anything else: 0. */
size_t ol_json_length(const ol_json_t *node);

/* Array element i; NULL when out of range or not an array. */
const ol_json_t *ol_json_at(const ol_json_t *arr, size_t i);

/* The value of the first member named key; NULL when absent. */
const ol_json_t *ol_json_get(const ol_json_t *obj, const char *key);

/* Member i of an object, in document order; NULL when out of range. */
const char *ol_json_key_at(const ol_json_t *obj, size_t i);
const ol_json_t *ol_json_value_at(const ol_json_t *obj, size_t i);

/* NUL-terminated UTF-8. A string holding U+0000 cannot be represented this
 * way, so "\u0000" is rejected at parse time: the NUL here is always the end. */
const char *ol_json_string(const ol_json_t *node);

/* The number as a double; 0 for anything that is not a number. Numbers too
 * large for a double (1e400) are rejected at parse time; -0 stays -0. */
double ol_json_number(const ol_json_t *node);

/* True, with *out set (out may be NULL), when the node is a number written
 * as an integer (no '.', no exponent) that fits an int64_t exactly; byte
 * counts up to 2^63-1 come back unrounded. 1.0, 1e3 and 2^63 give false and
 * leave *out alone; their value is still there through ol_json_number(). */
bool ol_json_int64(const ol_json_t *node, int64_t *out);

/* True, with *out set (out may be NULL), when the node is true or false. */
bool ol_json_bool(const ol_json_t *node, bool *out);

/* Follows a path of dot-separated keys and [N] indexes from root:
 *   "devices[0].stats.allocated_bytes.all.peak", "[2].name", "a[0][1]"
 * "" is root itself. NULL when a step is missing, of the wrong kind or
 * malformed: an empty key ("a..b", ".a", "a."), a key holding ']', an index
 * that is not plain decimal ("[]", "[-1]", "[01]", "[1"), or text right
 * after ']' that is not '.' or '['. Keys holding '.' or '[' cannot be named
 * here; use ol_json_get(). */
const ol_json_t *ol_json_path(const ol_json_t *root, const char *path);

/* ol_json_int64() of ol_json_path(), or fallback when either fails. */
int64_t ol_json_path_int64(const ol_json_t *root, const char *path, int64_t fallback);

/* ---- json_fields.c: figures read with presence, type and range checked --
 *
 * A reader of a file's tree walks it with ol_json_at_t cursors (a node and
 * the way to it, on the caller's stack); each read names what it wants,
 * and the first that does not get it records
 *   "FILE: devices[0].stats.allocated_bytes.all.peak: missing"
 *   "FILE: devices[0].stats.allocated_bytes.all.peak: \"big\" is not an integer"
 *   "FILE: devices[0].num_ooms: -5 is out of range (0 to 4611686018427387904)"
 * in the check's err (OL_EXIT_USAGE), after which every read gives 0, "",
 * false or an absent node: a reader goes on without a test after each read
 * and looks at check->failed once at the end. ol_json_need_* want the
 * field; ol_json_may_* take it absent or null as the fallback (fields a
 * later minor format added, or that the writer leaves out or null) but
 * check it like need when it is there. */
typedef struct ol_json_check {
  const char *file;
  ol_error_t *err;
  bool failed;
} ol_json_check_t;

typedef struct ol_json_at {
  const ol_json_t *node;       /* NULL: absent (or the walk failed above) */
  const struct ol_json_at *up; /* NULL: the root */
  const char *key;             /* NULL: element index of up's array */
  size_t index;
  ol_json_check_t *check;
} ol_json_at_t;

ol_json_at_t ol_json_at_root(ol_json_check_t *check, const ol_json_t *root);
/* Steps without a check: the node is NULL when absent. */
ol_json_at_t ol_json_at_key(const ol_json_at_t *obj, const char *key);
ol_json_at_t ol_json_at_index(const ol_json_at_t *arr, size_t i);
/* Records "FILE: PATH: <what>" unless a failure is already recorded. */
void ol_json_at_fail(const ol_json_at_t *at, const char *fmt, ...)
  __attribute__((format(printf, 2, 3)));

int64_t ol_json_need_int(const ol_json_at_t *obj, const char *key, int64_t min, int64_t max);
int64_t ol_json_may_int(const ol_json_at_t *obj, const char *key, int64_t min, int64_t max,
                        int64_t fallback);
double ol_json_need_number(const ol_json_at_t *obj, const char *key, double min, double max);
double ol_json_may_number(const ol_json_at_t *obj, const char *key, double min, double max,
                          double fallback);
bool ol_json_need_bool(const ol_json_at_t *obj, const char *key);
bool ol_json_may_bool(const ol_json_at_t *obj, const char *key, bool fallback);
const char *ol_json_need_string(const ol_json_at_t *obj, const char *key);
const char *ol_json_may_string(const ol_json_at_t *obj, const char *key, const char *fallback);
/* The member as a cursor, checked to be an object (array); may: absent or
 * null give a cursor whose node is NULL, which reads as absent. */
ol_json_at_t ol_json_need_object(const ol_json_at_t *obj, const char *key);
ol_json_at_t ol_json_may_object(const ol_json_at_t *obj, const char *key);
ol_json_at_t ol_json_need_array(const ol_json_at_t *obj, const char *key);
ol_json_at_t ol_json_may_array(const ol_json_at_t *obj, const char *key);
/* An element of an array read as a value itself (a timeline's points). */
int64_t ol_json_need_int_at(const ol_json_at_t *arr, size_t i, int64_t min, int64_t max);
const char *ol_json_need_string_at(const ol_json_at_t *arr, size_t i);

/* For tests only: the nth allocation the reader makes from now on, in this
 * thread, fails (1 = the next one); 0 turns it off. It fails once. */
void ol_json_fail_allocation(unsigned long nth);

#endif
