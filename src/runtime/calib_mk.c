/* calib_mk.c — the calibration's GEMM micro-kernel: the register tile of
 * the CPU template (cgen_gemm_variant.c: MR rows of A broadcast, NV vectors of B,
 * MR x NV accumulators) run over a packed B panel, to time how fast this
 * core multiplies for a given micro-tile, depth (kc) and panel width (nc).
 * Needs: <immintrin.h> on x86-64 (AVX-512 / AVX2 by function target, so the
 * library itself stays built for any x86-64).  Gives: rt_calib_mk_run,
 * rt_calib_mk_lanes.
 *
 * Loop order as the template's: for each NR-wide micro-panel of the B
 * panel (kc x nc, packed [panel][k][NR]), the A micro-panel ([k][MR], kc
 * deep) times it, accumulated into a C tile.  The B panel (kc x nc floats)
 * comes from L2 when it does not fit L1, as in the template; A stays in L1. */
#include <stdbool.h>
#include <stddef.h>

#include "calib.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_MK 1

/* One micro-kernel per (MR, NV): the accumulators must be named registers,
 * so MR and NV are constants (the loops unroll completely). */
#define MK_DEF(ISA, VT, W, ZERO, LOAD, BCAST, FMA, STORE, ADD, TGT, MR, NV)                               \
  __attribute__((target(TGT))) static void mk_##ISA##_##MR##_##NV(const float *a, const float *b, long kc, \
                                                                  long npan, float *c) {                  \
    for (long p = 0; p < npan; p++) {                                                                     \
      const float *bp = b + p * kc * (NV * W);                                                            \
      VT acc[MR][NV];                                                                                     \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                              \
        _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++) acc[i][j] = ZERO();                         \
      for (long k = 0; k < kc; k++) {                                                                     \
        VT bv[NV];                                                                                        \
        _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++) bv[j] = LOAD(bp + k * (NV * W) + j * W);   \
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                          \
          VT av = BCAST(a[k * MR + i]);                                                                   \
          _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++) acc[i][j] = FMA(av, bv[j], acc[i][j]);   \
        }                                                                                                 \
      }                                                                                                   \
      float *cp = c + p * (MR * NV * W);                                                                  \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++)                                              \
        _Pragma("GCC unroll 16") for (int j = 0; j < NV; j++) STORE(cp + (i * NV + j) * W,               \
                                                                    ADD(acc[i][j], LOAD(cp + (i * NV + j) * W))); \
    }                                                                                                     \
  }

#define MK512(MR, NV)                                                                                        \
  MK_DEF(z, __m512, 16, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps, \
         _mm512_add_ps, "avx512f,fma", MR, NV)
#define MK256(MR, NV)                                                                                        \
  MK_DEF(y, __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps, \
         _mm256_add_ps, "avx2,fma", MR, NV)

/* The micro-tiles plan search offers (search.c, space_for), both ISAs. */
MK512(6, 4)
MK512(8, 3)
MK512(6, 2)
MK512(4, 3)
MK512(5, 2)
MK512(4, 2)
MK256(6, 2)
MK256(4, 3)
MK256(5, 2)
MK256(4, 2)
MK256(2, 2)

typedef void (*mk_fn)(const float *, const float *, long, long, float *);
static const struct {
  bool avx512;
  int mr, nv;
  mk_fn fn;
} kernels[] = {
    {true, 6, 4, mk_z_6_4},  {true, 8, 3, mk_z_8_3},  {true, 6, 2, mk_z_6_2}, {true, 4, 3, mk_z_4_3},
    {true, 5, 2, mk_z_5_2},  {true, 4, 2, mk_z_4_2},  {false, 6, 2, mk_y_6_2}, {false, 4, 3, mk_y_4_3},
    {false, 5, 2, mk_y_5_2}, {false, 4, 2, mk_y_4_2}, {false, 2, 2, mk_y_2_2},
};
#else
#define HAVE_MK 0
#endif

int rt_calib_mk_lanes(bool avx512, bool avx2) {
#if HAVE_MK
  return avx512 ? 16 : avx2 ? 8 : 0;
#else
  (void)avx512, (void)avx2;
  return 0;
#endif
}

bool rt_calib_mk_run(bool avx512, int mr, int nr, const float *a, const float *b, long kc, long npan, float *c) {
#if HAVE_MK
  int w = avx512 ? 16 : 8;
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
    if (kernels[i].avx512 == avx512 && kernels[i].mr == mr && kernels[i].nv * w == nr) {
      kernels[i].fn(a, b, kc, npan, c);
      return true;
    }
#else
  (void)avx512, (void)mr, (void)nr, (void)a, (void)b, (void)kc, (void)npan, (void)c;
#endif
  return false;
}
