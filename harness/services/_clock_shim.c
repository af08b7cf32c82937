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
 * were not there.
 *
 * It also serves clock_nanosleep() on a monotonic clock straight from the kernel: the harness
 * leaves the monotonic clock unfaked, and libfaketime 0.9.10 still converts a monotonic
 * absolute deadline as if it were a faked wall-clock one, so Python's time.sleep() (an absolute
 * sleep on CLOCK_MONOTONIC) fails with EINVAL under it.  Later libfaketime releases leave such a
 * sleep alone too.
 *
 * The harness builds it (scripts/ensure-faketime) and puts it first in LD_PRELOAD.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
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

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *request,
                    struct timespec *remain) {
  static int (*next_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
  if (clock == CLOCK_MONOTONIC || clock == CLOCK_MONOTONIC_RAW || clock == CLOCK_BOOTTIME) {
    /* the kernel's own answer: clock_nanosleep returns the error, not -1 and errno */
    return syscall(SYS_clock_nanosleep, clock, flags, request, remain) == -1 ? errno : 0;
  }
  if (next_clock_nanosleep == NULL) {
    next_clock_nanosleep = (int (*)(clockid_t, int, const struct timespec *,
                                    struct timespec *))dlsym(RTLD_NEXT, "clock_nanosleep");
  }
  return next_clock_nanosleep(clock, flags, request, remain);
}
