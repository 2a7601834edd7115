/* lock.c: the slow half of ol_lock_t, a mutex of one futex word.
 *
 * The tracker takes its lock twice per allocation pair; glibc's
 * pthread_mutex_lock/unlock cost about 110 instructions a pair (type and
 * elision checks) where the uncontended case needs one atomic each way.
 * The word is 0 free, 1 held, 2 held with (maybe) sleepers; the fast paths
 * are inline in core.h, the waiting here (spin briefly, then sleep in the
 * kernel), after Drepper's "Futexes Are Tricky". Not recursive, like the
 * default pthread mutex it replaces. */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"

#define SPINS 100 /* the holder's critical section is a few hundred instructions */

static void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

static void futex(atomic_int *word, int op, int value)
{
  syscall(SYS_futex, (int *)word, op | FUTEX_PRIVATE_FLAG, value, NULL, NULL, 0);
}

void ol_lock_wait(ol_lock_t *l)
{
  for (int i = 0; i < SPINS; i++) {
    int expected = 0;
    if (atomic_load_explicit(&l->word, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_weak_explicit(&l->word, &expected, 1, memory_order_acquire,
                                              memory_order_relaxed))
      return;
    relax();
  }
  /* Mark the lock contended (2) while taking it, so its holder wakes us. */
  while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire) != 0)
    futex(&l->word, FUTEX_WAIT, 2);
}

void ol_lock_wake(ol_lock_t *l)
{
  futex(&l->word, FUTEX_WAKE, 1);
}
