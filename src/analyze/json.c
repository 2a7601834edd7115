/* json.c: the JSON reader that the CLI and the tests use on our reports.
 *
 * A recursive-descent parser over a byte range. Recursion is fine because
 * nesting is capped at OL_JSON_MAX_DEPTH, so stack use is bounded whatever
 * the input. The tree lives in an arena owned by the root: freeing walks a
 * short list of chunks, never the tree, and a parse that fails half way
 * drops everything it built in one go. While a container is open its
 * children wait on one shared scratch stack; when it closes they are copied
 * into the arena in one exactly sized block, so there is no per-container
 * growth to manage and no slack left in the tree. */
#include "json.h"
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

typedef struct ol_json_slot ol_json_slot_t;

struct ol_json {
  ol_json_kind_t kind;
  bool is_int;  /* number: the text was an integer that fits int64 */
  bool is_root; /* ol_json_free() ignores anything else */
  bool truth;   /* bool */
  union {
    struct {
      double real;
      int64_t exact; /* valid when is_int */
    } number;
    struct {
      const char *bytes; /* NUL-terminated, in the arena */
      size_t len;
    } string;
    struct {
      ol_json_slot_t *slots; /* in the arena */
      size_t count;
    } container;
  } as;
};

/* An array element or object member; arrays leave key NULL. Sharing one
 * layout lets one scratch stack serve both. */
struct ol_json_slot {
  const char *key;
  ol_json_t value;
};

/* ---- allocation --------------------------------------------------------- */

/* Thread-local so a test injecting failures cannot disturb another thread. */
static _Thread_local unsigned long fail_countdown;

void ol_json_fail_allocation(unsigned long nth)
{
  fail_countdown = nth;
}

static bool injected_failure(void)
{
  return fail_countdown != 0 && --fail_countdown == 0;
}

static void *xmalloc(size_t size)
{
  return injected_failure() ? NULL : malloc(size);
}

static void *xrealloc(void *ptr, size_t size)
{
  return injected_failure() ? NULL : realloc(ptr, size);
}

/* ---- the arena ---------------------------------------------------------- */

#define ARENA_ALIGN _Alignof(max_align_t)
#define CHUNK_MIN ((size_t)4 << 10)
#define CHUNK_MAX ((size_t)1 << 20)

typedef struct chunk {
  struct chunk *next;
  size_t used, cap;
  max_align_t data[]; /* max_align_t so every allocation starts aligned */
} chunk_t;

/* The root comes first so that a root pointer is also the document's. */
typedef struct doc {
  ol_json_t root;
  chunk_t *chunks; /* the head is the one small allocations come from */
  size_t next_cap; /* chunks double from CHUNK_MIN up to CHUNK_MAX */
} doc_t;

static chunk_t *new_chunk(size_t cap)
{
  if (cap > SIZE_MAX - sizeof(chunk_t))
    return NULL;
  chunk_t *c = xmalloc(sizeof(chunk_t) + cap);
  if (c) {
    c->next = NULL;
    c->used = 0;
    c->cap = cap;
  }
  return c;
}

static void *take(chunk_t *c, size_t size)
{
  void *p = (char *)c->data + c->used;
  c->used += size;
  return p;
}

/* Requests over a quarter of a chunk get a chunk of their own, linked
 * behind the head, so a big array does not strand the head's free space. */
static void *arena_alloc(doc_t *doc, size_t size)
{
  if (size > SIZE_MAX - ARENA_ALIGN)
    return NULL;
  size = (size + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
  chunk_t *head = doc->chunks;
  if (head && head->cap - head->used >= size)
    return take(head, size);
  bool own = head && size > doc->next_cap / 4;
  chunk_t *c = new_chunk(own || size > doc->next_cap ? size : doc->next_cap);
  if (!c)
    return NULL;
  if (own) {
    c->next = head->next;
    head->next = c;
  } else {
    c->next = head;
    doc->chunks = c;
    if (doc->next_cap < CHUNK_MAX)
      doc->next_cap *= 2;
  }
  return take(c, size);
}

static void doc_free(doc_t *doc)
{
  chunk_t *c = doc->chunks;
  while (c) {
    chunk_t *next = c->next;
    free(c);
    c = next;
  }
  free(doc);
}

void ol_json_free(ol_json_t *root)
{
  if (root && root->is_root)
    doc_free((doc_t *)(void *)root);
}

/* ---- parser state and errors ------------------------------------------ */

typedef struct parser {
  const unsigned char *start, *p, *end;
  doc_t *doc;
  int depth;
  ol_json_slot_t *stack; /* children of the open containers */
  size_t stack_len, stack_cap;
  char *scratch; /* a decoded string or a number's text */
  size_t scratch_cap;
  locale_t c_locale; /* for strtod_l, made on first use */
  char *err;
  size_t err_cap;
  bool no_memory; /* the error is ours: an allocation failed */
} parser_t;

/* ol_json_parse's message into the caller's buffer (NULL or cap 0: none). */
static void say(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *err, size_t cap, const char *fmt, ...)
{
  if (!err || cap == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

/* Columns count characters: UTF-8 continuation bytes do not start one. The
 * bytes before an error position are always valid UTF-8, since invalid
 * bytes stop the parse where they are. */
static void position(const parser_t *ps, const unsigned char *at, size_t *line, size_t *col)
{
  *line = 1;
  *col = 1;
  for (const unsigned char *c = ps->start; c < at; c++) {
    if (*c == '\n') {
      (*line)++;
      *col = 1;
    } else if ((*c & 0xC0) != 0x80) {
      (*col)++;
    }
  }
}

/* Always returns false, so callers can `return fail(...)`. */
static bool fail(parser_t *ps, const unsigned char *at, const char *fmt, ...)
  __attribute__((format(printf, 3, 4)));

static bool fail(parser_t *ps, const unsigned char *at, const char *fmt, ...)
{
  if (!ps->err || ps->err_cap == 0)
    return false;
  char msg[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t line, col;
  position(ps, at, &line, &col);
  say(ps->err, ps->err_cap, "line %zu, column %zu: %s", line, col, msg);
  return false;
}

static bool out_of_memory(parser_t *ps)
{
  ps->no_memory = true;
  say(ps->err, ps->err_cap, "out of memory");
  return false;
}

/* What sits at `at`, for messages: 'x', byte 0xC3, or end of input. */
static const char *describe(const parser_t *ps, const unsigned char *at, char *buf, size_t cap)
{
  if (at >= ps->end)
    return "end of input";
  if (*at >= 0x20 && *at < 0x7F)
    snprintf(buf, cap, "'%c'", *at);
  else
    snprintf(buf, cap, "byte 0x%02X", *at);
  return buf;
}

static bool fail_expected(parser_t *ps, const char *what)
{
  char buf[16];
  return fail(ps, ps->p, "expected %s, found %s", what, describe(ps, ps->p, buf, sizeof buf));
}

/* ---- scratch buffers ----------------------------------------------------- */

static bool reserve_scratch(parser_t *ps, size_t need)
{
  if (need <= ps->scratch_cap)
    return true;
  size_t cap = ps->scratch_cap ? ps->scratch_cap : 64;
  while (cap < need) {
    if (cap > SIZE_MAX / 2)
      return out_of_memory(ps);
    cap *= 2;
  }
  char *s = xrealloc(ps->scratch, cap);
  if (!s)
    return out_of_memory(ps);
  ps->scratch = s;
  ps->scratch_cap = cap;
  return true;
}

static bool push_slot(parser_t *ps, const char *key, const ol_json_t *value)
{
  if (ps->stack_len == ps->stack_cap) {
    size_t cap = ps->stack_cap ? ps->stack_cap * 2 : 16;
    if (cap > SIZE_MAX / sizeof *ps->stack)
      return out_of_memory(ps);
    ol_json_slot_t *s = xrealloc(ps->stack, cap * sizeof *s);
    if (!s)
      return out_of_memory(ps);
    ps->stack = s;
    ps->stack_cap = cap;
  }
  ps->stack[ps->stack_len].key = key;
  ps->stack[ps->stack_len].value = *value;
  ps->stack_len++;
  return true;
}

/* Moves the slots pushed since `base` into the arena as node's children. */
static bool pop_slots(parser_t *ps, size_t base, ol_json_t *node)
{
  size_t count = ps->stack_len - base;
  ol_json_slot_t *slots = NULL;
  if (count) {
    slots = arena_alloc(ps->doc, count * sizeof *slots);
    if (!slots)
      return out_of_memory(ps);
    memcpy(slots, ps->stack + base, count * sizeof *slots);
  }
  node->as.container.slots = slots;
  node->as.container.count = count;
  ps->stack_len = base;
  return true;
}

/* ---- lexical pieces ---------------------------------------------------- */

static void skip_space(parser_t *ps)
{
  while (ps->p < ps->end
         && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
    ps->p++;
}

static bool at_char(const parser_t *ps, unsigned char c)
{
  return ps->p < ps->end && *ps->p == c;
}

static bool is_digit_at(const parser_t *ps)
{
  return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

/* The length of the well-formed UTF-8 sequence at s, or 0. Follows the
 * Unicode table of well-formed byte sequences (3-7): no overlong forms, no
 * surrogates, nothing past U+10FFFF. */
static size_t utf8_length(const unsigned char *s, const unsigned char *end)
{
  unsigned char lo = 0x80, hi = 0xBF;
  size_t n;
  if (s[0] >= 0xC2 && s[0] <= 0xDF) {
    n = 2;
  } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
    n = 3;
    lo = s[0] == 0xE0 ? 0xA0 : lo;
    hi = s[0] == 0xED ? 0x9F : hi;
  } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
    n = 4;
    lo = s[0] == 0xF0 ? 0x90 : lo;
    hi = s[0] == 0xF4 ? 0x8F : hi;
  } else {
    return 0;
  }
  if ((size_t)(end - s) < n || s[1] < lo || s[1] > hi)
    return 0;
  for (size_t i = 2; i < n; i++)
    if ((s[i] & 0xC0) != 0x80)
      return 0;
  return n;
}

static size_t utf8_encode(uint32_t cp, char *out)
{
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Reads "\uXXXX" at s into *cp; false unless all six bytes are there. */
static bool read_u_escape(const unsigned char *s, const unsigned char *end, uint32_t *cp)
{
  if (end - s < 6 || s[0] != '\\' || s[1] != 'u')
    return false;
  uint32_t v = 0;
  for (int i = 2; i < 6; i++) {
    unsigned char c = s[i];
    uint32_t d;
    if (c >= '0' && c <= '9')
      d = (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f')
      d = (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      d = (uint32_t)(c - 'A' + 10);
    else
      return false;
    v = v << 4 | d;
  }
  *cp = v;
  return true;
}

/* ---- strings ------------------------------------------------------------ */

/* A \u escape at ps->p, pairing surrogates; appends UTF-8 at *len. */
static bool decode_u_escape(parser_t *ps, size_t *len)
{
  const unsigned char *at = ps->p;
  uint32_t cp, low;
  if (!read_u_escape(at, ps->end, &cp))
    return fail(ps, at, "invalid \\u escape: expected four hex digits");
  ps->p += 6;
  if (cp >= 0xDC00 && cp <= 0xDFFF)
    return fail(ps, at, "lone low surrogate \\u%04X", (unsigned)cp);
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    if (!read_u_escape(ps->p, ps->end, &low) || low < 0xDC00 || low > 0xDFFF)
      return fail(ps, at, "lone high surrogate \\u%04X, not followed by a low one",
                  (unsigned)cp);
    ps->p += 6;
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  }
  if (cp == 0)
    return fail(ps, at, "\\u0000 is not supported: strings are NUL-terminated");
  *len += utf8_encode(cp, ps->scratch + *len);
  return true;
}

/* One escape at ps->p (the backslash), appended at *len. The scratch has
 * room: no escape decodes to more bytes than it takes in the input. */
static bool decode_escape(parser_t *ps, size_t *len)
{
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  if (ps->end - ps->p < 2)
    return fail(ps, ps->end, "unterminated string");
  unsigned char e = ps->p[1];
  if (e == 'u')
    return decode_u_escape(ps, len);
  const char *hit = e ? strchr(from, e) : NULL;
  if (!hit) {
    char buf[16];
    return fail(ps, ps->p, "invalid escape: '\\' followed by %s",
                describe(ps, ps->p + 1, buf, sizeof buf));
  }
  ps->scratch[(*len)++] = to[hit - from];
  ps->p += 2;
  return true;
}

/* Plain bytes up to the next quote, backslash, control or non-ASCII byte,
 * copied as one run: the common case in our reports. */
static void copy_plain_run(parser_t *ps, size_t *len)
{
  const unsigned char *run = ps->p;
  while (ps->p < ps->end && *ps->p >= 0x20 && *ps->p < 0x80 && *ps->p != '"' && *ps->p != '\\')
    ps->p++;
  memcpy(ps->scratch + *len, run, (size_t)(ps->p - run));
  *len += (size_t)(ps->p - run);
}

static bool copy_utf8(parser_t *ps, size_t *len)
{
  size_t n = utf8_length(ps->p, ps->end);
  if (n == 0)
    return fail(ps, ps->p, "invalid UTF-8 (byte 0x%02X)", *ps->p);
  memcpy(ps->scratch + *len, ps->p, n);
  *len += n;
  ps->p += n;
  return true;
}

/* Decodes the string at ps->p (the opening quote) into the arena. A quick
 * scan to the closing quote first bounds the decoded length (no escape
 * decodes to more bytes than it takes), so the scratch is sized once and
 * the decoding loop never checks for room. */
static bool parse_string(parser_t *ps, const char **out, size_t *out_len)
{
  const unsigned char *q = ++ps->p;
  while (q < ps->end && *q != '"')
    q += *q == '\\' && ps->end - q >= 2 ? 2 : 1;
  if (!reserve_scratch(ps, (size_t)(q - ps->p) + 1))
    return false;
  size_t len = 0;
  for (;;) {
    copy_plain_run(ps, &len);
    if (ps->p >= ps->end)
      return fail(ps, ps->end, "unterminated string");
    unsigned char c = *ps->p;
    if (c == '"')
      break;
    bool ok = c == '\\' ? decode_escape(ps, &len)
              : c < 0x20 ? fail(ps, ps->p, "control character U+%04X in a string", c)
                         : copy_utf8(ps, &len);
    if (!ok)
      return false;
  }
  ps->p++;
  char *s = arena_alloc(ps->doc, len + 1);
  if (!s)
    return out_of_memory(ps);
  memcpy(s, ps->scratch, len);
  s[len] = '\0';
  *out = s;
  *out_len = len;
  return true;
}

/* ---- numbers ------------------------------------------------------------ */

static void skip_digits(parser_t *ps)
{
  while (is_digit_at(ps))
    ps->p++;
}

/* Checks the RFC 8259 number grammar at ps->p and moves past it; *integer
 * says whether it had neither fraction nor exponent. */
static bool scan_number(parser_t *ps, bool *integer)
{
  if (at_char(ps, '-'))
    ps->p++;
  if (!is_digit_at(ps))
    return fail_expected(ps, "a digit after '-'");
  if (*ps->p++ == '0' && is_digit_at(ps))
    return fail(ps, ps->p, "leading zeros are not allowed");
  skip_digits(ps);
  *integer = true;
  if (at_char(ps, '.')) {
    ps->p++;
    if (!is_digit_at(ps))
      return fail_expected(ps, "a digit after the decimal point");
    skip_digits(ps);
    *integer = false;
  }
  if (at_char(ps, 'e') || at_char(ps, 'E')) {
    ps->p++;
    if (at_char(ps, '+') || at_char(ps, '-'))
      ps->p++;
    if (!is_digit_at(ps))
      return fail_expected(ps, "a digit in the exponent");
    skip_digits(ps);
    *integer = false;
  }
  return true;
}

/* Integer text to int64, exactly; false when it does not fit. The magnitude
 * is gathered unsigned so that -9223372036854775808 fits too. */
static bool exact_int64(const unsigned char *s, const unsigned char *end, int64_t *out)
{
  bool neg = *s == '-';
  s += neg;
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  uint64_t mag = 0;
  for (; s < end; s++) {
    unsigned d = (unsigned)(*s - '0');
    if (mag > (limit - d) / 10)
      return false;
    mag = mag * 10 + d;
  }
  if (!neg)
    *out = (int64_t)mag;
  else
    *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
  return true;
}

/* strtod_l with the C locale: plain strtod would read "1.5" wrongly in a
 * process whose locale uses a decimal comma. */
static bool text_to_double(parser_t *ps, const unsigned char *s, size_t n, double *out)
{
  if (!ps->c_locale) {
    ps->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!ps->c_locale)
      return out_of_memory(ps);
  }
  if (!reserve_scratch(ps, n + 1))
    return false;
  memcpy(ps->scratch, s, n);
  ps->scratch[n] = '\0';
  errno = 0;
  *out = strtod_l(ps->scratch, NULL, ps->c_locale);
  /* Underflow to zero or a subnormal is a fine answer; infinity is not. */
  if (errno == ERANGE && (*out > 1.0 || *out < -1.0))
    return fail(ps, s, "number out of range for a double");
  return true;
}

static bool parse_number(parser_t *ps, ol_json_t *node)
{
  const unsigned char *s = ps->p;
  bool integer = false; /* set by scan_number; this quiets gcc -O2 */
  if (!scan_number(ps, &integer))
    return false;
  node->kind = OL_JSON_NUMBER;
  node->is_int = integer && exact_int64(s, ps->p, &node->as.number.exact);
  if (!node->is_int)
    return text_to_double(ps, s, (size_t)(ps->p - s), &node->as.number.real);
  /* An int64 converts to the nearest double, as strtod would round it;
   * only the sign of -0 would be lost. */
  node->as.number.real = (double)node->as.number.exact;
  if (*s == '-' && node->as.number.exact == 0)
    node->as.number.real = -0.0;
  return true;
}

/* ---- values ------------------------------------------------------------- */

static bool parse_value(parser_t *ps, ol_json_t *node);

static bool parse_literal(parser_t *ps, ol_json_t *node)
{
  static const struct {
    const char *text;
    ol_json_kind_t kind;
    bool truth;
  } literals[] = {{"true", OL_JSON_BOOL, true}, {"false", OL_JSON_BOOL, false},
                  {"null", OL_JSON_NULL, false}};
  for (size_t i = 0; i < sizeof literals / sizeof *literals; i++) {
    size_t n = strlen(literals[i].text);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, literals[i].text, n) == 0) {
      node->kind = literals[i].kind;
      node->truth = literals[i].truth;
      ps->p += n;
      return true;
    }
  }
  return fail(ps, ps->p, "invalid literal (expected true, false or null)");
}

/* After ',' the next element must come; ']' or '}' there is the common
 * mistake, so it gets its own message. */
static bool trailing_comma(parser_t *ps, unsigned char close, const char *what)
{
  if (!at_char(ps, close))
    return false;
  fail(ps, ps->p, "trailing comma in an %s", what);
  return true;
}

/* One array element, pushed onto the stack. */
static bool parse_element(parser_t *ps)
{
  ol_json_t item = {0};
  return parse_value(ps, &item) && push_slot(ps, NULL, &item);
}

/* One "key": value pair, pushed onto the stack. */
static bool parse_member(parser_t *ps)
{
  const char *key;
  size_t key_len;
  ol_json_t value = {0};
  if (!at_char(ps, '"'))
    return fail_expected(ps, "a string key");
  if (!parse_string(ps, &key, &key_len))
    return false;
  skip_space(ps);
  if (!at_char(ps, ':'))
    return fail_expected(ps, "':' after an object key");
  ps->p++;
  return parse_value(ps, &value) && push_slot(ps, key, &value);
}

typedef struct container {
  char close;
  ol_json_kind_t kind;
  const char *name;      /* for the trailing-comma message */
  const char *expected;  /* what may follow an item */
  bool (*item)(parser_t *ps);
} container_t;

static const container_t array_form = {']', OL_JSON_ARRAY, "array",
                                       "',' or ']' after an array element", parse_element};
static const container_t object_form = {'}', OL_JSON_OBJECT, "object",
                                        "',' or '}' after an object member", parse_member};

/* Items separated by commas up to the closing bracket; the items wait on
 * the stack and become the node's children at the end. */
static bool parse_items(parser_t *ps, ol_json_t *node, const container_t *form)
{
  size_t base = ps->stack_len;
  ps->p++;
  skip_space(ps);
  if (!at_char(ps, form->close)) {
    for (;;) {
      if (!form->item(ps))
        return false;
      skip_space(ps);
      if (!at_char(ps, ','))
        break;
      ps->p++;
      skip_space(ps);
      if (trailing_comma(ps, form->close, form->name))
        return false;
    }
    if (!at_char(ps, form->close))
      return fail_expected(ps, form->expected);
  }
  ps->p++;
  node->kind = form->kind;
  return pop_slots(ps, base, node);
}

/* The depth check sits here, before descending, so the C stack never holds
 * more than OL_JSON_MAX_DEPTH containers' frames. */
static bool parse_container(parser_t *ps, ol_json_t *node)
{
  if (ps->depth == OL_JSON_MAX_DEPTH)
    return fail(ps, ps->p, "nesting deeper than %d levels", OL_JSON_MAX_DEPTH);
  ps->depth++;
  bool ok = parse_items(ps, node, *ps->p == '[' ? &array_form : &object_form);
  ps->depth--;
  return ok;
}

static bool parse_value(parser_t *ps, ol_json_t *node)
{
  skip_space(ps);
  if (ps->p >= ps->end)
    return fail_expected(ps, "a value");
  unsigned char c = *ps->p;
  if (c == '[' || c == '{')
    return parse_container(ps, node);
  if (c == '"') {
    node->kind = OL_JSON_STRING;
    return parse_string(ps, &node->as.string.bytes, &node->as.string.len);
  }
  if (c == '-' || (c >= '0' && c <= '9'))
    return parse_number(ps, node);
  if (c == 't' || c == 'f' || c == 'n')
    return parse_literal(ps, node);
  /* RFC 8259 lets a reader skip a byte order mark; we write none, so one
   * here means the file came from elsewhere: say so rather than "0xEF". */
  if (ps->p == ps->start && ps->end - ps->p >= 3 && memcmp(ps->p, "\xEF\xBB\xBF", 3) == 0)
    return fail(ps, ps->p, "byte order mark is not allowed");
  return fail_expected(ps, "a value");
}

static bool parse_document(parser_t *ps)
{
  if (!parse_value(ps, &ps->doc->root))
    return false;
  skip_space(ps);
  if (ps->p < ps->end)
    return fail_expected(ps, "end of input after the value");
  return true;
}

/* ol_json_parse, and whether a failure was ours (out of memory). */
static ol_json_t *parse_text(const char *text, size_t len, char *err, size_t err_cap,
                             bool *no_memory)
{
  say(err, err_cap, "%s", "");
  if (!text && len) {
    say(err, err_cap, "no input text");
    return NULL;
  }
  static const char empty[1] = "";
  const unsigned char *start = (const unsigned char *)(text ? text : empty);
  parser_t ps = {.start = start, .p = start, .end = start + len, .err = err, .err_cap = err_cap};
  ps.doc = xmalloc(sizeof *ps.doc);
  if (!ps.doc) {
    *no_memory = true;
    out_of_memory(&ps);
    return NULL;
  }
  *ps.doc = (doc_t){.next_cap = CHUNK_MIN};
  bool ok = parse_document(&ps);
  free(ps.stack);
  free(ps.scratch);
  if (ps.c_locale)
    freelocale(ps.c_locale);
  *no_memory = ps.no_memory;
  if (!ok) {
    doc_free(ps.doc);
    return NULL;
  }
  ps.doc->root.is_root = true;
  return &ps.doc->root;
}

ol_json_t *ol_json_parse(const char *text, size_t len, char *err, size_t err_cap)
{
  bool no_memory = false;
  return parse_text(text, len, err, err_cap, &no_memory);
}

/* ---- files -------------------------------------------------------------- */

static bool too_big(const char *path, ol_error_t *err)
{
  ol_fail(err, OL_EXIT_USAGE, "%s is over the %zu MiB limit", path, OL_JSON_MAX_FILE >> 20);
  return false;
}

/* Reads at most OL_JSON_MAX_FILE bytes, growing the buffer as it goes so
 * that pipes and /proc files, whose size stat does not know, work too. */
static bool read_fd(int fd, const char *path, char **out, size_t *out_len, ol_error_t *err)
{
  struct stat st;
  size_t cap = 4096;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    if ((uint64_t)st.st_size > OL_JSON_MAX_FILE)
      return too_big(path, err);
    cap = (size_t)st.st_size + 1; /* + 1: EOF shows without growing */
  }
  char *buf = xmalloc(cap);
  size_t len = 0;
  while (buf) {
    if (len == cap) {
      cap = cap > OL_JSON_MAX_FILE / 2 ? OL_JSON_MAX_FILE + 1 : cap * 2;
      char *grown = xrealloc(buf, cap);
      if (!grown)
        break;
      buf = grown;
    }
    ssize_t n = read(fd, buf + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      ol_fail(err, OL_EXIT_USAGE, "cannot read %s: %s", path, strerror(errno));
      free(buf);
      return false;
    }
    if (n == 0) {
      *out = buf;
      *out_len = len;
      return true;
    }
    len += (size_t)n;
    if (len > OL_JSON_MAX_FILE) {
      free(buf);
      return too_big(path, err);
    }
  }
  free(buf);
  ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
  return false;
}

/* A gzip'd file (its magic bytes first) inflated in memory, as the trace
 * reader reads gzip'd traces: `oomlens merge r*.json.gz` works as `report`
 * does. The same bound as a plain file's holds for what it inflates to. */
static bool gunzip(const char *path, char **text, size_t *len, ol_error_t *err)
{
  if (*len < 2 || (unsigned char)(*text)[0] != 0x1f || (unsigned char)(*text)[1] != 0x8b)
    return true;
  z_stream z = {.next_in = (Bytef *)*text, .avail_in = (uInt)*len};
  size_t cap = *len * 4 + 4096, used = 0;
  char *out = cap <= OL_JSON_MAX_FILE + 1 ? xmalloc(cap) : NULL;
  int rc = out && *len <= UINT_MAX ? inflateInit2(&z, 16 + MAX_WBITS) : Z_MEM_ERROR;
  while (rc == Z_OK) {
    if (used == cap) {
      char *grown = cap <= OL_JSON_MAX_FILE ? xrealloc(out, cap * 2) : NULL;
      if (!grown) {
        rc = cap > OL_JSON_MAX_FILE ? Z_BUF_ERROR : Z_MEM_ERROR;
        break;
      }
      out = grown;
      cap *= 2;
    }
    z.next_out = (Bytef *)out + used;
    z.avail_out = (uInt)(cap - used < UINT_MAX ? cap - used : UINT_MAX);
    rc = inflate(&z, Z_NO_FLUSH);
    used = (size_t)((char *)z.next_out - out);
    if (rc == Z_BUF_ERROR && z.avail_in == 0)
      rc = Z_DATA_ERROR; /* the stream ends before its end: cut short */
  }
  if (out)
    inflateEnd(&z);
  free(*text);
  *text = NULL;
  if (rc != Z_STREAM_END || used > OL_JSON_MAX_FILE) {
    free(out);
    if (rc == Z_MEM_ERROR)
      ol_fail(err, OL_EXIT_FAILURE, "%s: out of memory", path);
    else if (rc == Z_BUF_ERROR || used > OL_JSON_MAX_FILE)
      too_big(path, err);
    else
      ol_fail(err, OL_EXIT_USAGE, "%s: a gzip'd file that does not inflate (cut short or "
                   "corrupt)", path);
    return false;
  }
  *text = out;
  *len = used;
  return true;
}

ol_json_t *ol_json_parse_file(const char *path, ol_error_t *err)
{
  ol_error_clear(err);
  if (!path) {
    ol_fail(err, OL_EXIT_USAGE, "no file path");
    return NULL;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ol_fail(err, OL_EXIT_USAGE, "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  char *text = NULL;
  size_t len = 0;
  bool ok = read_fd(fd, path, &text, &len, err);
  close(fd);
  if (!ok || !gunzip(path, &text, &len, err))
    return NULL;
  char msg[256];
  bool no_memory = false;
  ol_json_t *root = parse_text(text, len, msg, sizeof msg, &no_memory);
  free(text);
  if (!root)
    ol_fail(err, no_memory ? OL_EXIT_FAILURE : OL_EXIT_USAGE, "%s: %s", path, msg);
  return root;
}

/* ---- accessors ---------------------------------------------------------- */

ol_json_kind_t ol_json_kind(const ol_json_t *node)
{
  return node ? node->kind : OL_JSON_NONE;
}

static bool is_container(const ol_json_t *node)
{
  return node && (node->kind == OL_JSON_ARRAY || node->kind == OL_JSON_OBJECT);
}

size_t ol_json_length(const ol_json_t *node)
{
  return is_container(node) ? node->as.container.count : 0;
}

/* Slot i of a container of the given kind, or NULL. */
static const ol_json_slot_t *slot_at(const ol_json_t *node, ol_json_kind_t kind, size_t i)
{
  if (!node || node->kind != kind || i >= node->as.container.count)
    return NULL;
  return &node->as.container.slots[i];
}

const ol_json_t *ol_json_at(const ol_json_t *arr, size_t i)
{
  const ol_json_slot_t *s = slot_at(arr, OL_JSON_ARRAY, i);
  return s ? &s->value : NULL;
}

const char *ol_json_key_at(const ol_json_t *obj, size_t i)
{
  const ol_json_slot_t *s = slot_at(obj, OL_JSON_OBJECT, i);
  return s ? s->key : NULL;
}

const ol_json_t *ol_json_value_at(const ol_json_t *obj, size_t i)
{
  const ol_json_slot_t *s = slot_at(obj, OL_JSON_OBJECT, i);
  return s ? &s->value : NULL;
}

/* Lookup by a key that need not be NUL-terminated, for ol_json_path. A
 * linear scan: report objects are small, and the first match must win. */
static const ol_json_t *get_n(const ol_json_t *obj, const char *key, size_t n)
{
  if (!obj || obj->kind != OL_JSON_OBJECT)
    return NULL;
  for (size_t i = 0; i < obj->as.container.count; i++) {
    const ol_json_slot_t *s = &obj->as.container.slots[i];
    if (strncmp(s->key, key, n) == 0 && s->key[n] == '\0')
      return &s->value;
  }
  return NULL;
}

const ol_json_t *ol_json_get(const ol_json_t *obj, const char *key)
{
  return key ? get_n(obj, key, strlen(key)) : NULL;
}

const char *ol_json_string(const ol_json_t *node)
{
  return node && node->kind == OL_JSON_STRING ? node->as.string.bytes : NULL;
}

double ol_json_number(const ol_json_t *node)
{
  return node && node->kind == OL_JSON_NUMBER ? node->as.number.real : 0.0;
}

bool ol_json_int64(const ol_json_t *node, int64_t *out)
{
  if (!node || node->kind != OL_JSON_NUMBER || !node->is_int)
    return false;
  if (out)
    *out = node->as.number.exact;
  return true;
}

bool ol_json_bool(const ol_json_t *node, bool *out)
{
  if (!node || node->kind != OL_JSON_BOOL)
    return false;
  if (out)
    *out = node->truth;
  return true;
}

/* ---- paths -------------------------------------------------------------- */

/* "[N]" at s: plain decimal, no sign, no leading zeros. Returns the text
 * after ']', or NULL when malformed. */
static const char *index_step(const ol_json_t **node, const char *s)
{
  size_t i = 0;
  const char *d = s + 1;
  if (*d < '0' || *d > '9' || (d[0] == '0' && d[1] != ']'))
    return NULL;
  for (; *d >= '0' && *d <= '9'; d++) {
    size_t digit = (size_t)(*d - '0');
    if (i > (SIZE_MAX - digit) / 10)
      return NULL;
    i = i * 10 + digit;
  }
  if (*d != ']')
    return NULL;
  *node = ol_json_at(*node, i);
  return d + 1;
}

/* A key at s, running to the next '.' or '[' or the end. */
static const char *key_step(const ol_json_t **node, const char *s)
{
  size_t n = strcspn(s, ".[]");
  if (n == 0 || s[n] == ']')
    return NULL;
  *node = get_n(*node, s, n);
  return s + n;
}

const ol_json_t *ol_json_path(const ol_json_t *root, const char *path)
{
  if (!path)
    return NULL;
  const ol_json_t *node = root;
  const char *s = path;
  while (node && s && *s) {
    if (*s == '[')
      s = index_step(&node, s);
    else if (s == path)
      s = key_step(&node, s);
    else if (*s == '.')
      s = key_step(&node, s + 1);
    else
      s = NULL; /* text straight after ']' */
  }
  return s ? node : NULL;
}

int64_t ol_json_path_int64(const ol_json_t *root, const char *path, int64_t fallback)
{
  int64_t v;
  return ol_json_int64(ol_json_path(root, path), &v) ? v : fallback;
}
