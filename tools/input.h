/* input.h: the file a command reads, made readable more than once. The
 * commands open their input more than once (replay reads the device's
 * size from the trace before replaying it; report looks for a JSON
 * report's '{' before reading a trace; export probes the trace first), and
 * a pipe gives its bytes only once. */
#ifndef OL_INPUT_H
#define OL_INPUT_H

#include <stddef.h>

#include "core.h"

/* A path that reads from the start at every open: path itself for a
 * regular file (or one that cannot be looked at: the command's own open
 * says why); for anything else (`/dev/stdin` on a pipe, a process
 * substitution, a FIFO), a copy of all it gives, kept in a temporary file
 * that has no name from the start (in $TMPDIR, else /tmp: nothing is left
 * there, whatever happens) and is read through /proc/self/fd. NULL, with
 * err set, when the copy cannot be made. buf: room for the path made. */
const char *ol_input_rereadable(const char *path, char *buf, size_t cap, ol_error_t *err);

#endif
