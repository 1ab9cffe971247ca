/* vcpu_pair.c — how far apart two CPUs of this machine are: a cache line's
 * round trip between a thread pinned to CPU A and one pinned to CPU B, and
 * the rate at which B reads 1 MiB that A just wrote.
 *
 *     make -C bench vcpu          (or: cc -O2 vcpu_pair.c -o vcpu_pair -lpthread)
 *     vcpu_pair [A B]             (default CPUs 0 and 1)
 *
 * On the shared 2-vCPU Zen 5 VM the host moves the two vCPUs between cores of
 * one CCD (round trip ~80-110 ns, 1 MiB in ~11 us) and cores of two CCDs
 * (~400 ns, ~28 us), at intervals of seconds to minutes; every 2-thread
 * figure follows (bench/RESULTS.md, z9mb).  Run it before a timing to know
 * which placement it met; on a loaded machine the best of its batches
 * still shows it when both threads got a few ms together (else run it
 * under chrt -f 1, as root).  Not a test. */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRIPS 5000L /* a batch; the best of BATCHES is kept (a loaded machine preempts some) */
#define BATCHES 20
#define BYTES (1L << 20)

static _Alignas(64) volatile long flag;
static unsigned char *buf;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Pins the calling thread to cpu; 0, or -1 where the OS refuses. */
static int pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s) ? -1 : 0;
}

/* B's side: answers each odd flag with the next even one, then reads the
 * buffer each time flag turns to -1 - 2 r, answering -2 - 2 r. */
static void *side_b(void *arg) {
  (void)arg;
  for (long i = 1; i < 2 * TRIPS * BATCHES; i += 2) {
    while (flag != i) ;
    flag = i + 1;
  }
  for (long r = 0; r < 10; r++) {
    while (flag != -1 - 2 * r) ;
    volatile unsigned long sum = 0;
    for (long k = 0; k < BYTES; k += 64) sum += buf[k];
    flag = -2 - 2 * r;
  }
  return NULL;
}

int main(int argc, char **argv) {
  int a = argc > 2 ? atoi(argv[1]) : 0, b = argc > 2 ? atoi(argv[2]) : 1;
  buf = aligned_alloc(4096, BYTES);
  if (!buf || pin(a)) {
    fprintf(stderr, "vcpu_pair: cannot use CPU %d\n", a);
    return 1;
  }
  memset(buf, 1, BYTES);
  pthread_attr_t at;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(b, &s);
  pthread_t th;
  if (pthread_attr_init(&at) || pthread_attr_setaffinity_np(&at, sizeof s, &s) || pthread_create(&th, &at, side_b, NULL)) {
    fprintf(stderr, "vcpu_pair: cannot start a thread on CPU %d\n", b);
    return 1;
  }
  double trip = 1e9;
  for (long j = 0; j < BATCHES; j++) {
    double t0 = now();
    for (long i = 1 + 2 * TRIPS * j; i < 2 * TRIPS * (j + 1); i += 2) {
      flag = i;
      while (flag != i + 1) ;
    }
    double t = (now() - t0) / TRIPS;
    trip = t < trip ? t : trip;
  }
  double best = 1e9;
  for (long r = 0; r < 10; r++) {
    memset(buf, (int)r, BYTES);
    double t = now();
    flag = -1 - 2 * r;
    while (flag != -2 - 2 * r) ;
    t = now() - t;
    best = t < best ? t : best;
  }
  pthread_join(th, NULL);
  printf("cpus %d %d: round trip %.0f ns, 1 MiB written on %d read on %d in %.1f us (%.1f GB/s)\n", a, b, trip * 1e9, a, b,
         best * 1e6, (double)BYTES / best / 1e9);
  free(buf);
  return 0;
}
