/* oomlens.h: the public API of liboomlens.so.
 *
 * A job needs none of it: preloading the library is enough. A program that
 * wants a report at a moment of its choosing can look these up with dlsym
 * (so it still runs without oomlens) or link against the library. */
#ifndef OOMLENS_H
#define OOMLENS_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, e.g. "0.1.0". */
const char *oomlens_version(void);

/* Writes the text and JSON reports now (paths from OOMLENS_REPORT).
 * Returns 0 when every file was written, -1 otherwise (a warning on stderr
 * says why), or when oomlens is disabled with OOMLENS_ENABLE=0. */
int oomlens_write_report(void);

/* Pauses (on = 0) or resumes (on = 1) the taking of call sites in this
 * process: allocations made while paused are counted as before, without a
 * call site (their role "unknown"). Returns the state before the call (1
 * taking, 0 paused), or -1 when oomlens is disabled. What the pause is
 * for: measuring what the capture costs a job, step against step in one
 * process, and leaving a section of a job out of the call sites. It
 * takes nothing when call sites are off (OOMLENS_ROLES=0 and no
 * OOMLENS_STACKS): then it only records the state. */
int oomlens_capture(int on);

#ifdef __cplusplus
}
#endif

#endif
