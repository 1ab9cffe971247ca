/* peak.c — the machine's FMA roofline: a register-only loop of independent
 * FMAs (24 zmm / 12 ymm chains), on 1 thread and on 2 threads at once.
 *   make -C bench peak */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define N_ITER 20000000L
__attribute__((target("avx512f,fma"))) static float run512(long n) {
  __m512 c[24];
  for (int i = 0; i < 24; i++) c[i] = _mm512_set1_ps((float)i);
  __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f);
  for (long k = 0; k < n; k++) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) c[i] = _mm512_fmadd_ps(a, c[i], b);
  }
  __m512 s = c[0];
  for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, c[i]);
  return _mm512_reduce_add_ps(s);
}
__attribute__((target("avx2,fma"))) static float run256(long n) {
  __m256 c[12];
  for (int i = 0; i < 12; i++) c[i] = _mm256_set1_ps((float)i);
  __m256 a = _mm256_set1_ps(1.0000001f), b = _mm256_set1_ps(0.9999999f);
  for (long k = 0; k < n; k++) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) c[i] = _mm256_fmadd_ps(a, c[i], b);
  }
  float o[8];
  __m256 s = c[0];
  for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, c[i]);
  _mm256_storeu_ps(o, s);
  return o[0];
}
static void *th512(void *p) {
  *(float *)p = run512(N_ITER);
  return NULL;
}

int main(void) {
  for (int r = 0; r < 3; r++) {
    double t = now();
    float x = run512(N_ITER);
    t = now() - t;
    printf("avx512 1 thread : %6.1f GFLOP/s  (%g)\n", N_ITER * 24.0 * 32 / t / 1e9, x);
    t = now();
    x = run256(N_ITER);
    t = now() - t;
    printf("avx2   1 thread : %6.1f GFLOP/s  (%g)\n", N_ITER * 12.0 * 16 / t / 1e9, x);
    pthread_t th;
    float y = 0;
    t = now();
    pthread_create(&th, NULL, th512, &y);
    x = run512(N_ITER);
    pthread_join(th, NULL);
    t = now() - t;
    printf("avx512 2 threads: %6.1f GFLOP/s  (%g)\n", 2 * N_ITER * 24.0 * 32 / t / 1e9, x + y);
  }
  return 0;
}
