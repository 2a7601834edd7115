/* fuzz_options.c: libFuzzer target for the option parsers (src/core/options.c):
 * ol_parse_size, ol_parse_bool, and an OOMLENS_* variable holding the input
 * loaded through the option table, as the library loads it at start-up.
 *
 * The first byte picks the variable, the rest (up to a NUL) is its value. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { VALUE_CAP = 4096, NAME_CAP = 64 };

/* One "NAME=value" buffer per option, handed to putenv and taken back with
 * unsetenv: putenv does not copy, so nothing grows from input to input
 * (setenv would leak a copy per call). */
static char entries[OL_OPT_COUNT][NAME_CAP + 1 + VALUE_CAP];
static char names[OL_OPT_COUNT][NAME_CAP];
static size_t name_len[OL_OPT_COUNT];

/* The variable names come from the table itself (its printed form), so the
 * target follows options.c as options are added. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
  char *listing = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&listing, &len);
  if (!out)
    abort();
  ol_options_print(out);
  fclose(out);
  int opt = 0;
  for (char *line = strtok(listing, "\n"); line && opt < OL_OPT_COUNT;
       line = strtok(NULL, "\n")) {
    char name[NAME_CAP];
    if (sscanf(line, " %63s", name) != 1 || strncmp(name, "OOMLENS_", 8) != 0)
      continue;
    name_len[opt] = strlen(name);
    memcpy(names[opt], name, name_len[opt] + 1);
    snprintf(entries[opt], sizeof entries[opt], "%s=", name);
    opt++;
  }
  free(listing);
  if (opt != OL_OPT_COUNT)
    abort();
  return 0;
}

static void parse_alone(const char *text)
{
  uint64_t size;
  if (ol_parse_size(text, &size)) {
    /* A size that parses, printed in bytes, parses back to itself. */
    char again[32];
    uint64_t back;
    snprintf(again, sizeof again, "%" PRIu64, size);
    if (!ol_parse_size(again, &back) || back != size)
      __builtin_trap();
  }
  bool b;
  if (ol_parse_bool(text, &b) && strlen(text) > 5)
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  int opt = data[0] % OL_OPT_COUNT;
  char *value = entries[opt] + name_len[opt] + 1;
  size_t n = size - 1 < VALUE_CAP - 1 ? size - 1 : VALUE_CAP - 1;
  memcpy(value, data + 1, n);
  value[n] = '\0';
  parse_alone(value);
  putenv(entries[opt]);
  ol_options_reload();
  for (int i = 0; i < OL_OPT_COUNT; i++) {
    (void)ol_option_bool((ol_option_t)i);
    (void)ol_option_size((ol_option_t)i);
    if (!ol_option_text((ol_option_t)i))
      __builtin_trap();
  }
  /* Taken back so that the next input sees only its own variable set. */
  unsetenv(names[opt]);
  return 0;
}
