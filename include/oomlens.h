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

#ifdef __cplusplus
}
#endif

#endif
