/* test_json.c: the JSON reader (src/analyze/json.c) against tables of valid and
 * invalid documents, paths, int64 edges, files and allocation failures.
 *
 * Fixtures come from OL_JSON_DATA_DIR (the build should point it at
 * tests/json_data; by default it is relative to the source root). */
#include <check.h>

#include "check_run.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "core.h"

#ifndef OL_JSON_DATA_DIR
#define OL_JSON_DATA_DIR "tests/json_data"
#endif

#define ERR_CAP 256

/* Parses a document that must be valid, failing the test with the message. */
static ol_json_t *parse_ok_len(const char *text, size_t len)
{
  char err[ERR_CAP];
  ol_json_t *root = ol_json_parse(text, len, err, sizeof err);
  ck_assert_msg(root != NULL, "parse of <%.60s> failed: %s", text, err);
  ck_assert_str_eq(err, "");
  return root;
}

static ol_json_t *parse_ok(const char *text)
{
  return parse_ok_len(text, strlen(text));
}

/* "[[[...]]]" with depth brackets each way; the caller frees it. */
static char *nested_arrays(size_t depth)
{
  char *s = malloc(2 * depth + 1);
  ck_assert_ptr_nonnull(s);
  memset(s, '[', depth);
  memset(s + depth, ']', depth);
  s[2 * depth] = '\0';
  return s;
}

/* ---- valid documents ------------------------------------------------- */

/* What one node in a valid document must hold. is_int and value apply to
 * numbers (exact int64) and bools (value 0 or 1); str to strings; real to
 * numbers (checked bit-for-bit, so -0 differs from 0). */
static const struct valid_case {
  const char *text;
  const char *path;
  ol_json_kind_t kind;
  bool is_int;
  int64_t value;
  double real;
  const char *str;
  size_t length; /* arrays and objects */
} valid_cases[] = {
  {"null", "", OL_JSON_NULL, false, 0, 0, NULL, 0},
  {"true", "", OL_JSON_BOOL, false, 1, 0, NULL, 0},
  {" false ", "", OL_JSON_BOOL, false, 0, 0, NULL, 0},
  {"0", "", OL_JSON_NUMBER, true, 0, 0.0, NULL, 0},
  {"-0", "", OL_JSON_NUMBER, true, 0, -0.0, NULL, 0},
  {"42", "", OL_JSON_NUMBER, true, 42, 42.0, NULL, 0},
  {"-17", "", OL_JSON_NUMBER, true, -17, -17.0, NULL, 0},
  {"9223372036854775807", "", OL_JSON_NUMBER, true, INT64_MAX, 9223372036854775807.0, NULL, 0},
  {"-9223372036854775808", "", OL_JSON_NUMBER, true, INT64_MIN, -9223372036854775808.0, NULL,
   0},
  {"1e300", "", OL_JSON_NUMBER, false, 0, 1e300, NULL, 0},
  {"-1.5E-3", "", OL_JSON_NUMBER, false, 0, -1.5e-3, NULL, 0},
  {"0.5", "", OL_JSON_NUMBER, false, 0, 0.5, NULL, 0},
  {"1E+2", "", OL_JSON_NUMBER, false, 0, 100.0, NULL, 0},
  {"-0.0", "", OL_JSON_NUMBER, false, 0, -0.0, NULL, 0},
  {"1e-400", "", OL_JSON_NUMBER, false, 0, 0.0, NULL, 0},
  {"\"\"", "", OL_JSON_STRING, false, 0, 0, "", 0},
  {"\"hello\"", "", OL_JSON_STRING, false, 0, 0, "hello", 0},
  {"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "", OL_JSON_STRING, false, 0, 0, "\"\\/\b\f\n\r\t", 0},
  {"\"\\u0041\\u00e9\\u20AC\"", "", OL_JSON_STRING, false, 0, 0, "A\xC3\xA9\xE2\x82\xAC", 0},
  {"\"\\ud83d\\ude00\"", "", OL_JSON_STRING, false, 0, 0, "\xF0\x9F\x98\x80", 0},
  {"\"\\uDBFF\\uDFFF\"", "", OL_JSON_STRING, false, 0, 0, "\xF4\x8F\xBF\xBF", 0},
  {"\"caf\xC3\xA9 \xF0\x9F\x98\x80 \xEF\xBF\xBF\"", "", OL_JSON_STRING, false, 0, 0,
   "caf\xC3\xA9 \xF0\x9F\x98\x80 \xEF\xBF\xBF", 0},
  {"[]", "", OL_JSON_ARRAY, false, 0, 0, NULL, 0},
  {"{}", "", OL_JSON_OBJECT, false, 0, 0, NULL, 0},
  {" [1, \"two\", null, true, {}, []] ", "", OL_JSON_ARRAY, false, 0, 0, NULL, 6},
  {"[1, [2, [3]]]", "[1][1][0]", OL_JSON_NUMBER, true, 3, 3.0, NULL, 0},
  {"{\"a\": {\"b\": [false, true]}}", "a.b[1]", OL_JSON_BOOL, false, 1, 0, NULL, 0},
  {"{\"k\": 1, \"k\": 2}", "k", OL_JSON_NUMBER, true, 1, 1.0, NULL, 0},
  {"{\"k\": 1, \"k\": 2}", "", OL_JSON_OBJECT, false, 0, 0, NULL, 2},
  {"\t\r\n {\"x\" :\n[ ] }\n", "x", OL_JSON_ARRAY, false, 0, 0, NULL, 0},
  {"{\"\\u00e9t\\u00e9\": \"summer\"}", "\xC3\xA9t\xC3\xA9", OL_JSON_STRING, false, 0, 0,
   "summer", 0},
  {"{\"\": 5}", "", OL_JSON_OBJECT, false, 0, 0, NULL, 1},
};

static void check_valid_node(const struct valid_case *c, const ol_json_t *node)
{
  ck_assert_msg(node != NULL, "<%s>: path '%s' not found", c->text, c->path);
  ck_assert_int_eq(ol_json_kind(node), c->kind);
  int64_t i = 0;
  bool b = false;
  switch (c->kind) {
  case OL_JSON_NUMBER:
    ck_assert_int_eq(ol_json_int64(node, &i), c->is_int);
    if (c->is_int)
      ck_assert_int_eq(i, c->value);
    ck_assert_msg(ol_json_number(node) == c->real
                    && !!signbit(ol_json_number(node)) == !!signbit(c->real),
                  "<%s>: %.17g, expected %.17g", c->text, ol_json_number(node), c->real);
    break;
  case OL_JSON_BOOL:
    ck_assert(ol_json_bool(node, &b));
    ck_assert_int_eq(b, c->value);
    break;
  case OL_JSON_STRING:
    ck_assert_str_eq(ol_json_string(node), c->str);
    break;
  default:
    ck_assert_uint_eq(ol_json_length(node), c->length);
  }
}

START_TEST(valid_document)
{
  const struct valid_case *c = &valid_cases[_i];
  ol_json_t *root = parse_ok(c->text);
  check_valid_node(c, ol_json_path(root, c->path));
  ol_json_free(root);
}
END_TEST

/* Parsing takes a length, not a NUL: bytes past len are never read. */
START_TEST(valid_length_bounded)
{
  char err[ERR_CAP];
  ol_json_t *root = ol_json_parse("[1]garbage", 3, err, sizeof err);
  ck_assert_ptr_nonnull(root);
  ck_assert_uint_eq(ol_json_length(root), 1);
  ol_json_free(root);
}
END_TEST

START_TEST(valid_depth_64)
{
  char *text = nested_arrays(OL_JSON_MAX_DEPTH);
  ol_json_t *root = parse_ok(text);
  const ol_json_t *node = root;
  for (int d = 1; d < OL_JSON_MAX_DEPTH; d++)
    node = ol_json_at(node, 0);
  ck_assert_int_eq(ol_json_kind(node), OL_JSON_ARRAY);
  ck_assert_uint_eq(ol_json_length(node), 0);
  ol_json_free(root);
  free(text);
}
END_TEST

START_TEST(valid_object_iteration)
{
  ol_json_t *root = parse_ok("{\"z\": 1, \"a\": \"x\", \"m\": null, \"a\": 2}");
  static const char *const keys[] = {"z", "a", "m", "a"};
  ck_assert_uint_eq(ol_json_length(root), 4);
  for (size_t i = 0; i < 4; i++) {
    ck_assert_str_eq(ol_json_key_at(root, i), keys[i]);
    ck_assert_ptr_nonnull(ol_json_value_at(root, i));
  }
  ck_assert_ptr_null(ol_json_key_at(root, 4));
  ck_assert_ptr_null(ol_json_value_at(root, 4));
  ck_assert_str_eq(ol_json_string(ol_json_get(root, "a")), "x");
  ck_assert_int_eq(ol_json_kind(ol_json_get(root, "m")), OL_JSON_NULL);
  ck_assert_ptr_null(ol_json_get(root, "missing"));
  ck_assert_ptr_null(ol_json_at(root, 0)); /* ol_json_at is for arrays */
  ol_json_free(root);
}
END_TEST

/* A large flat array and a long string: sizes that would expose quadratic
 * growth or per-element recursion. */
START_TEST(valid_large_input)
{
  enum { N = 200000 };
  char *text = malloc(2 * N + 2);
  ck_assert_ptr_nonnull(text);
  text[0] = '[';
  for (size_t i = 0; i < N; i++) {
    text[1 + 2 * i] = (char)('0' + i % 10);
    text[2 + 2 * i] = i + 1 < N ? ',' : ']';
  }
  ol_json_t *root = parse_ok_len(text, 2 * N + 1);
  ck_assert_uint_eq(ol_json_length(root), N);
  ck_assert_int_eq(ol_json_path_int64(root, "[199999]", -1), 9);
  ol_json_free(root);
  memset(text, 'x', 2 * N + 1);
  text[0] = text[2 * N] = '"';
  root = parse_ok_len(text, 2 * N + 1);
  ck_assert_uint_eq(strlen(ol_json_string(root)), 2 * N - 1);
  ol_json_free(root);
  free(text);
}
END_TEST

/* ---- invalid documents ------------------------------------------------- */

/* len 0 means strlen(text); the expected message is the whole err text. */
static const struct invalid_case {
  const char *text;
  size_t len;
  const char *err;
} invalid_cases[] = {
  {"", 0, "line 1, column 1: expected a value, found end of input"},
  {"  \n ", 0, "line 2, column 2: expected a value, found end of input"},
  {"[1, 2,]", 0, "line 1, column 7: trailing comma in an array"},
  {"{\"a\": 1,}", 0, "line 1, column 9: trailing comma in an object"},
  {"[,1]", 0, "line 1, column 2: expected a value, found ','"},
  {"01", 0, "line 1, column 2: leading zeros are not allowed"},
  {"-01", 0, "line 1, column 3: leading zeros are not allowed"},
  {"00", 0, "line 1, column 2: leading zeros are not allowed"},
  {"1.", 0, "line 1, column 3: expected a digit after the decimal point, found end of input"},
  {"1.e5", 0, "line 1, column 3: expected a digit after the decimal point, found 'e'"},
  {".5", 0, "line 1, column 1: expected a value, found '.'"},
  {"+1", 0, "line 1, column 1: expected a value, found '+'"},
  {"-", 0, "line 1, column 2: expected a digit after '-', found end of input"},
  {"-Infinity", 0, "line 1, column 2: expected a digit after '-', found 'I'"},
  {"NaN", 0, "line 1, column 1: expected a value, found 'N'"},
  {"1e", 0, "line 1, column 3: expected a digit in the exponent, found end of input"},
  {"1e+", 0, "line 1, column 4: expected a digit in the exponent, found end of input"},
  {"1e400", 0, "line 1, column 1: number out of range for a double"},
  {"nul", 0, "line 1, column 1: invalid literal (expected true, false or null)"},
  {"[tru]", 0, "line 1, column 2: invalid literal (expected true, false or null)"},
  {"True", 0, "line 1, column 1: expected a value, found 'T'"},
  {"nullx", 0, "line 1, column 5: expected end of input after the value, found 'x'"},
  {"1 2", 0, "line 1, column 3: expected end of input after the value, found '2'"},
  {"[1] // c", 0, "line 1, column 5: expected end of input after the value, found '/'"},
  {"/* c */ 1", 0, "line 1, column 1: expected a value, found '/'"},
  {"{\"a\": 1} x", 0, "line 1, column 10: expected end of input after the value, found 'x'"},
  {"1\0", 2, "line 1, column 2: expected end of input after the value, found byte 0x00"},
  {"\"\\x\"", 0, "line 1, column 2: invalid escape: '\\' followed by 'x'"},
  {"\"\\'\"", 0, "line 1, column 2: invalid escape: '\\' followed by '''"},
  {"\"\\ud800\"", 0, "line 1, column 2: lone high surrogate \\uD800, not followed by a low one"},
  {"\"\\ud800\\u0041\"", 0,
   "line 1, column 2: lone high surrogate \\uD800, not followed by a low one"},
  {"\"\\udc00\"", 0, "line 1, column 2: lone low surrogate \\uDC00"},
  {"\"\\u12G4\"", 0, "line 1, column 2: invalid \\u escape: expected four hex digits"},
  {"\"\\u12", 0, "line 1, column 2: invalid \\u escape: expected four hex digits"},
  {"\"\\u0000\"", 0, "line 1, column 2: \\u0000 is not supported: strings are NUL-terminated"},
  {"\"a\tb\"", 0, "line 1, column 3: control character U+0009 in a string"},
  {"\"a\nb\"", 0, "line 1, column 3: control character U+000A in a string"},
  {"\"a\0b\"", 5, "line 1, column 3: control character U+0000 in a string"},
  {"\"abc", 0, "line 1, column 5: unterminated string"},
  {"\"abc\\", 0, "line 1, column 6: unterminated string"},
  {"\"\xC3\x28\"", 0, "line 1, column 2: invalid UTF-8 (byte 0xC3)"},
  {"\"\xC0\xAF\"", 0, "line 1, column 2: invalid UTF-8 (byte 0xC0)"},
  {"\"\xE0\x80\xAF\"", 0, "line 1, column 2: invalid UTF-8 (byte 0xE0)"},
  {"\"\xED\xA0\x80\"", 0, "line 1, column 2: invalid UTF-8 (byte 0xED)"},
  {"\"\xF4\x90\x80\x80\"", 0, "line 1, column 2: invalid UTF-8 (byte 0xF4)"},
  {"\"\xE2\x82\"", 0, "line 1, column 2: invalid UTF-8 (byte 0xE2)"},
  {"\"ok\x80\"", 0, "line 1, column 4: invalid UTF-8 (byte 0x80)"},
  {"\"\xFF\"", 0, "line 1, column 2: invalid UTF-8 (byte 0xFF)"},
  {"\x80", 0, "line 1, column 1: expected a value, found byte 0x80"},
  {"\xEF\xBB\xBF{}", 0, "line 1, column 1: byte order mark is not allowed"},
  {"[", 0, "line 1, column 2: expected a value, found end of input"},
  {"{", 0, "line 1, column 2: expected a string key, found end of input"},
  {"{1: 2}", 0, "line 1, column 2: expected a string key, found '1'"},
  {"{\"a\" 1}", 0, "line 1, column 6: expected ':' after an object key, found '1'"},
  {"{\"a\": }", 0, "line 1, column 7: expected a value, found '}'"},
  {"[1 2]", 0, "line 1, column 4: expected ',' or ']' after an array element, found '2'"},
  {"[1}", 0, "line 1, column 3: expected ',' or ']' after an array element, found '}'"},
  {"{\"a\": 1 \"b\": 2}", 0,
   "line 1, column 9: expected ',' or '}' after an object member, found '\"'"},
  {"{\n  \"a\": 1,\n  \"b\" 2\n}", 0,
   "line 3, column 7: expected ':' after an object key, found '2'"},
  /* columns count characters: the two bytes of e-acute are one column */
  {"[\"\xC3\xA9\", x]", 0, "line 1, column 7: expected a value, found 'x'"},
};

START_TEST(invalid_document)
{
  const struct invalid_case *c = &invalid_cases[_i];
  size_t len = c->len ? c->len : strlen(c->text);
  char err[ERR_CAP];
  ol_json_t *root = ol_json_parse(c->text, len, err, sizeof err);
  ck_assert_msg(root == NULL, "case %d parsed but should not", _i);
  ck_assert_str_eq(err, c->err);
}
END_TEST

START_TEST(invalid_depth_65)
{
  char err[ERR_CAP];
  char *text = nested_arrays(OL_JSON_MAX_DEPTH + 1);
  ck_assert_ptr_null(ol_json_parse(text, strlen(text), err, sizeof err));
  ck_assert_str_eq(err, "line 1, column 65: nesting deeper than 64 levels");
  free(text);
  /* objects count the same way as arrays */
  char obj[8 * (OL_JSON_MAX_DEPTH + 1) + 1] = "";
  for (int d = 0; d <= OL_JSON_MAX_DEPTH; d++)
    strcat(obj, "{\"a\":");
  ck_assert_ptr_null(ol_json_parse(obj, strlen(obj), err, sizeof err));
  ck_assert_str_eq(err, "line 1, column 321: nesting deeper than 64 levels");
}
END_TEST

/* A million brackets: rejected at the 65th, long before the stack cares. */
START_TEST(invalid_depth_huge)
{
  char err[ERR_CAP];
  char *text = nested_arrays(1000000);
  ck_assert_ptr_null(ol_json_parse(text, strlen(text), err, sizeof err));
  ck_assert_str_eq(err, "line 1, column 65: nesting deeper than 64 levels");
  free(text);
}
END_TEST

START_TEST(invalid_err_buffer_edges)
{
  char err[8];
  ck_assert_ptr_null(ol_json_parse("[1,]", 4, err, sizeof err));
  ck_assert_str_eq(err, "line 1,"); /* cut short, still terminated */
  ck_assert_ptr_null(ol_json_parse("[1,]", 4, NULL, 0));
  ck_assert_ptr_null(ol_json_parse("[1,]", 4, err, 0));
  ck_assert_ptr_null(ol_json_parse(NULL, 3, err, sizeof err));
  ck_assert_ptr_null(ol_json_parse(NULL, 0, err, sizeof err));
}
END_TEST

/* ---- int64 ------------------------------------------------------------- */

static const struct int_case {
  const char *text;
  bool exact;
  int64_t value;
  double real;
} int_cases[] = {
  {"9223372036854775807", true, INT64_MAX, 9223372036854775807.0},
  {"9223372036854775808", false, 0, 9223372036854775808.0},
  {"-9223372036854775808", true, INT64_MIN, -9223372036854775808.0},
  {"-9223372036854775809", false, 0, -9223372036854775809.0},
  {"18446744073709551616", false, 0, 18446744073709551616.0},
  {"99999999999999999999999999", false, 0, 1e26},
  {"9007199254740993", true, 9007199254740993, 9007199254740992.0}, /* 2^53 + 1 */
  {"1152921504606846977", true, 1152921504606846977, 1152921504606846976.0},
  {"1.0", false, 0, 1.0},
  {"1e3", false, 0, 1000.0},
  {"-1", true, -1, -1.0},
};

START_TEST(int64_edges)
{
  const struct int_case *c = &int_cases[_i];
  ol_json_t *root = parse_ok(c->text);
  int64_t v = 12345;
  ck_assert_int_eq(ol_json_kind(root), OL_JSON_NUMBER);
  ck_assert_int_eq(ol_json_int64(root, &v), c->exact);
  ck_assert_int_eq(v, c->exact ? c->value : 12345); /* untouched on false */
  ck_assert_int_eq(ol_json_int64(root, NULL), c->exact);
  ck_assert_msg(ol_json_number(root) == c->real, "<%s>: %.17g", c->text, ol_json_number(root));
  ck_assert_int_eq(ol_json_path_int64(root, "", 7), c->exact ? c->value : 7);
  ol_json_free(root);
}
END_TEST

/* ---- accessors on NULL and on the wrong kind ------------------------- */

START_TEST(accessors_null_safe)
{
  int64_t i = 5;
  bool b = true;
  ck_assert_int_eq(ol_json_kind(NULL), OL_JSON_NONE);
  ck_assert_uint_eq(ol_json_length(NULL), 0);
  ck_assert_ptr_null(ol_json_at(NULL, 0));
  ck_assert_ptr_null(ol_json_get(NULL, "a"));
  ck_assert_ptr_null(ol_json_key_at(NULL, 0));
  ck_assert_ptr_null(ol_json_value_at(NULL, 0));
  ck_assert_ptr_null(ol_json_string(NULL));
  ck_assert(ol_json_number(NULL) == 0.0);
  ck_assert(!ol_json_int64(NULL, &i));
  ck_assert(!ol_json_bool(NULL, &b));
  ck_assert_int_eq(i, 5);
  ck_assert(b);
  ck_assert_ptr_null(ol_json_path(NULL, ""));
  ck_assert_ptr_null(ol_json_path(NULL, "a"));
  ck_assert_int_eq(ol_json_path_int64(NULL, "a", -3), -3);
  ol_json_free(NULL);
}
END_TEST

START_TEST(accessors_wrong_kind)
{
  ol_json_t *root = parse_ok("[\"s\", 1, true, null, {\"k\": 1}]");
  const ol_json_t *s = ol_json_at(root, 0), *n = ol_json_at(root, 1);
  const ol_json_t *b = ol_json_at(root, 2), *obj = ol_json_at(root, 4);
  ck_assert_ptr_null(ol_json_string(n));
  ck_assert(ol_json_number(s) == 0.0);
  ck_assert(!ol_json_int64(b, NULL));
  ck_assert(!ol_json_bool(n, NULL));
  ck_assert_uint_eq(ol_json_length(s), 0);
  ck_assert_ptr_null(ol_json_get(root, "k"));
  ck_assert_ptr_null(ol_json_get(obj, NULL));
  ck_assert_ptr_null(ol_json_key_at(root, 0));
  ck_assert_ptr_null(ol_json_at(root, 5));
  /* freeing a node that is not the root is refused, not a double free */
  ol_json_free((ol_json_t *)obj);
  ck_assert_int_eq(ol_json_path_int64(root, "[4].k", 0), 1);
  ol_json_free(root);
}
END_TEST

/* ---- paths --------------------------------------------------------------- */

static const char path_doc[] =
  "{\"devices\": [{\"device\": 0, \"stats\": {\"allocated_bytes\": {\"all\": "
  "{\"peak\": 9223372036854775807}}}}, {\"device\": 1}],"
  " \"name\": \"x\", \"a.b\": 1, \"m\": [[1, 2], [3]], \"\": 5, \"z\": 1.5}";

/* found: the path must lead to a node; then value is its int64 or, with
 * exact false, the node must exist but not be an int64. */
static const struct path_case {
  const char *path;
  bool found;
  bool exact;
  int64_t value;
} path_cases[] = {
  {"devices[0].stats.allocated_bytes.all.peak", true, true, INT64_MAX},
  {"devices[1].device", true, true, 1},
  {"devices[0].device", true, true, 0},
  {"m[1][0]", true, true, 3},
  {"m[0][1]", true, true, 2},
  {"", true, false, 0},
  {"name", true, false, 0},
  {"z", true, false, 0},
  {"devices", true, false, 0},
  /* missing */
  {"nope", false, false, 0},
  {"devices[2]", false, false, 0},
  {"devices[0].stats.nope", false, false, 0},
  {"m[1][1]", false, false, 0},
  {"name.x", false, false, 0},
  {"name[0]", false, false, 0},
  {"devices.x", false, false, 0},
  {"m[99999999999999999999999]", false, false, 0},
  {"a.b", false, false, 0}, /* keys with dots need ol_json_get */
  /* malformed */
  {"devices[", false, false, 0},
  {"devices[]", false, false, 0},
  {"devices[-1]", false, false, 0},
  {"devices[+1]", false, false, 0},
  {"devices[01]", false, false, 0},
  {"devices[ 0]", false, false, 0},
  {"devices[0x1]", false, false, 0},
  {"devices[1", false, false, 0},
  {"devices[0]device", false, false, 0},
  {"devices[0]]", false, false, 0},
  {"devices..x", false, false, 0},
  {".devices", false, false, 0},
  {"devices.", false, false, 0},
  {"devices.[0]", false, false, 0},
  {"name]", false, false, 0},
  {"m[0]x[1]", false, false, 0},
};

START_TEST(path_lookup)
{
  const struct path_case *c = &path_cases[_i];
  ol_json_t *root = parse_ok(path_doc);
  const ol_json_t *node = ol_json_path(root, c->path);
  ck_assert_msg((node != NULL) == c->found, "path '%s'", c->path);
  int64_t v = -42;
  ck_assert_int_eq(ol_json_int64(node, &v), c->exact);
  ck_assert_int_eq(ol_json_path_int64(root, c->path, -42), c->exact ? c->value : -42);
  ol_json_free(root);
}
END_TEST

START_TEST(path_edges)
{
  ol_json_t *root = parse_ok(path_doc);
  ck_assert_ptr_eq(ol_json_path(root, ""), root);
  ck_assert_ptr_null(ol_json_path(root, NULL));
  ck_assert_int_eq(ol_json_path_int64(ol_json_get(root, "m"), "[1][0]", 0), 3);
  ck_assert_int_eq(ol_json_path_int64(root, "a.b", 9), 9);
  ck_assert_int_eq(ol_json_path_int64(ol_json_get(root, "a.b"), "", 9), 1);
  ck_assert_str_eq(ol_json_string(ol_json_path(root, "name")), "x");
  ol_json_free(root);
}
END_TEST

/* ---- files --------------------------------------------------------------- */

START_TEST(file_report_fixture)
{
  ol_error_t err;
  ol_json_t *root = ol_json_parse_file(OL_JSON_DATA_DIR "/report.json", &err);
  ck_assert_msg(root != NULL, "%s", err.text);
  ck_assert_str_eq(err.text, "");
  ck_assert_int_eq(err.status, OL_EXIT_OK);
  ck_assert_int_eq(ol_json_path_int64(root, "oomlens_report", 0), 1);
  ck_assert_int_eq(ol_json_path_int64(root, "devices[0].stats.allocated_bytes.all.peak", 0),
                   INT64_MAX);
  ck_assert_int_eq(ol_json_path_int64(root, "devices[1].mem_info.total", 0), 85899345920);
  ck_assert_uint_eq(ol_json_length(ol_json_path(root, "devices[1].calls")), 0);
  ck_assert_str_eq(ol_json_string(ol_json_get(root, "command")),
                   "python train.py --lr 3e-4 \"quoted\" caf\xC3\xA9");
  ck_assert(ol_json_number(ol_json_get(root, "time_unix")) == 1718000000.125);
  bool failed = true;
  ck_assert(ol_json_bool(ol_json_get(root, "tracking_failed"), &failed));
  ck_assert(!failed);
  ol_json_free(root);
}
END_TEST

START_TEST(file_truncated_fixture)
{
  ol_error_t err;
  ck_assert_ptr_null(ol_json_parse_file(OL_JSON_DATA_DIR "/truncated.json", &err));
  ck_assert_str_eq(err.text, OL_JSON_DATA_DIR
                   "/truncated.json: line 5, column 1: expected a string key, found end of input");
  ck_assert_int_eq(err.status, OL_EXIT_USAGE); /* a bad input file */
}
END_TEST

START_TEST(file_missing)
{
  ol_error_t err;
  ck_assert_ptr_null(ol_json_parse_file("/nonexistent/oomlens.json", &err));
  ck_assert_str_eq(err.text, "cannot open /nonexistent/oomlens.json: No such file or directory");
  ck_assert_int_eq(err.status, OL_EXIT_USAGE);
  ck_assert_ptr_null(ol_json_parse_file(NULL, &err));
  ck_assert_str_eq(err.text, "no file path");
}
END_TEST

START_TEST(file_directory)
{
  ol_error_t err;
  ck_assert_ptr_null(ol_json_parse_file("/", &err));
  ck_assert_str_eq(err.text, "cannot read /: Is a directory");
}
END_TEST

/* Written here, so the content is known byte for byte. */
START_TEST(file_temporary)
{
  char path[OL_TEST_DIR_MAX];
  snprintf(path, sizeof path, "%s/json-XXXXXX", getenv(OL_TEST_SCRATCH_ENV));
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  const char text[] = "{\"bytes\": [9223372036854775807, -9223372036854775808]}\n";
  ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  ol_error_t err;
  ol_json_t *root = ol_json_parse_file(path, &err);
  ck_assert_msg(root != NULL, "%s", err.text);
  ck_assert_int_eq(ol_json_path_int64(root, "bytes[0]", 0), INT64_MAX);
  ck_assert_int_eq(ol_json_path_int64(root, "bytes[1]", 0), INT64_MIN);
  ol_json_free(root);
  unlink(path);
}
END_TEST

/* A sparse file one byte over the limit: refused before any read. */
START_TEST(file_too_big)
{
  char path[OL_TEST_DIR_MAX];
  snprintf(path, sizeof path, "%s/json-XXXXXX", getenv(OL_TEST_SCRATCH_ENV));
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(ftruncate(fd, (off_t)OL_JSON_MAX_FILE + 1), 0);
  close(fd);
  char expect[OL_TEST_DIR_MAX + 64];
  ol_error_t err;
  ck_assert_ptr_null(ol_json_parse_file(path, &err));
  snprintf(expect, sizeof expect, "%s is over the 256 MiB limit", path);
  ck_assert_str_eq(err.text, expect);
  unlink(path);
}
END_TEST

/* ---- allocation failures ---------------------------------------------- */

/* Every allocation the parser makes, failed in turn: each must give NULL
 * and "out of memory" and leak nothing (ASan and valgrind watch that). */
START_TEST(oom_every_allocation)
{
  /* big enough for several chunks, the scratch stack to grow, and a
   * number that goes through strtod */
  enum { N = 3000 };
  size_t cap = 64 + N * 24;
  char *text = malloc(cap);
  ck_assert_ptr_nonnull(text);
  size_t len = (size_t)snprintf(text, cap, "{\"s\": \"\\u00e9x\", \"f\": 1.5, \"a\": [");
  for (int i = 0; i < N; i++)
    len += (size_t)snprintf(text + len, cap - len, "%s{\"k\": [%d]}", i ? "," : "", i);
  len += (size_t)snprintf(text + len, cap - len, "]}");
  char err[ERR_CAP];
  unsigned long failures = 0;
  for (unsigned long nth = 1;; nth++) {
    ol_json_fail_allocation(nth);
    ol_json_t *root = ol_json_parse(text, len, err, sizeof err);
    if (root) {
      ol_json_fail_allocation(0);
      ck_assert_int_eq(ol_json_path_int64(root, "a[2999].k[0]", 0), 2999);
      ol_json_free(root);
      break;
    }
    ck_assert_str_eq(err, "out of memory");
    failures++;
  }
  ck_assert_uint_ge(failures, 5);
  free(text);
}
END_TEST

START_TEST(oom_file)
{
  ol_error_t err;
  ol_json_fail_allocation(1); /* the read buffer */
  ck_assert_ptr_null(ol_json_parse_file(OL_JSON_DATA_DIR "/report.json", &err));
  ck_assert_str_eq(err.text, OL_JSON_DATA_DIR "/report.json: out of memory");
  ck_assert_int_eq(err.status, OL_EXIT_FAILURE); /* ours, not the file's */
  ol_json_fail_allocation(2); /* the document */
  ck_assert_ptr_null(ol_json_parse_file(OL_JSON_DATA_DIR "/report.json", &err));
  ck_assert_str_eq(err.text, OL_JSON_DATA_DIR "/report.json: out of memory");
  ck_assert_int_eq(err.status, OL_EXIT_FAILURE);
  ol_json_fail_allocation(0);
}
END_TEST

/* ---- the suite ----------------------------------------------------------- */

#define COUNT(a) ((int)(sizeof(a) / sizeof *(a)))

static Suite *json_suite(void)
{
  Suite *s = suite_create("json");
  TCase *tc = tcase_create("valid");
  tcase_add_loop_test(tc, valid_document, 0, COUNT(valid_cases));
  tcase_add_test(tc, valid_length_bounded);
  tcase_add_test(tc, valid_depth_64);
  tcase_add_test(tc, valid_object_iteration);
  tcase_add_test(tc, valid_large_input);
  suite_add_tcase(s, tc);

  tc = tcase_create("invalid");
  tcase_add_loop_test(tc, invalid_document, 0, COUNT(invalid_cases));
  tcase_add_test(tc, invalid_depth_65);
  tcase_add_test(tc, invalid_depth_huge);
  tcase_add_test(tc, invalid_err_buffer_edges);
  suite_add_tcase(s, tc);

  tc = tcase_create("int64");
  tcase_add_loop_test(tc, int64_edges, 0, COUNT(int_cases));
  suite_add_tcase(s, tc);

  tc = tcase_create("accessors");
  tcase_add_test(tc, accessors_null_safe);
  tcase_add_test(tc, accessors_wrong_kind);
  suite_add_tcase(s, tc);

  tc = tcase_create("path");
  tcase_add_loop_test(tc, path_lookup, 0, COUNT(path_cases));
  tcase_add_test(tc, path_edges);
  suite_add_tcase(s, tc);

  tc = tcase_create("file");
  tcase_add_test(tc, file_report_fixture);
  tcase_add_test(tc, file_truncated_fixture);
  tcase_add_test(tc, file_missing);
  tcase_add_test(tc, file_directory);
  tcase_add_test(tc, file_temporary);
  tcase_add_test(tc, file_too_big);
  suite_add_tcase(s, tc);

  /* valgrind is slow on the failure loop; give it room */
  tc = tcase_create("oom");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, oom_every_allocation);
  tcase_add_test(tc, oom_file);
  suite_add_tcase(s, tc);
  return s;
}

int main(void)
{
  return ol_run_suite(json_suite());
}
