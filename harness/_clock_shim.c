/*
 * Preloaded before libfaketime so that programs linked with jemalloc (Debian's redis-server)
 * start under it.
 *
 * jemalloc initialises itself on the first malloc, often inside another library's
 * constructor, and while it holds its init lock it calls clock_gettime() and
 * pthread_cond_init().  libfaketime intercepts both and, not yet initialised, initialises
 * itself there: its dlsym() lookups allocate, which waits for jemalloc's lock, and the process
 * hangs for good (libfaketime issues #130, #327, #478; not fixed in 0.9.10).
 *
 * Until this library's constructor has run (and has made libfaketime initialise, from a
 * point where allocating is safe), both calls are served without libfaketime: the clock by
 * the kernel (real time, during startup only), a condition variable with default attributes
 * as glibc does it, zeroed.  From then on every call goes to libfaketime as if this library
 * were not there.  The harness builds it (scripts/ensure-faketime) and puts it first in
 * LD_PRELOAD.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*cond_init_fn)(pthread_cond_t *, const pthread_condattr_t *);

static clock_gettime_fn next_clock_gettime;
static cond_init_fn next_cond_init;
static volatile int ready;

__attribute__((constructor)) static void idem_clock_shim_ready(void) {
  if (ready) return;
  (void)time(NULL); /* libfaketime initialises now, outside any allocator's lock */
  next_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
  next_cond_init = (cond_init_fn)dlsym(RTLD_NEXT, "pthread_cond_init");
  ready = next_clock_gettime != NULL && next_cond_init != NULL;
}

int clock_gettime(clockid_t clock, struct timespec *tp) {
  if (!ready) return (int)syscall(SYS_clock_gettime, clock, tp);
  return next_clock_gettime(clock, tp);
}

int pthread_cond_init(pthread_cond_t *cond, const pthread_condattr_t *attr) {
  if (!ready) {
    if (attr == NULL) { /* what glibc's own pthread_cond_init does for default attributes */
      memset(cond, 0, sizeof *cond);
      return 0;
    }
    idem_clock_shim_ready();
  }
  return next_cond_init(cond, attr);
}
