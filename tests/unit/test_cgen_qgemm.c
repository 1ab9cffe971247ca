/* test_cgen_qgemm.c — the int8 GEMM (cgen_qgemm.c) against a direct int64
 * reference on the unpacked matrices ((x - za) w summed, + bias, times the
 * multiplier in fp32, rounded to nearest even, + zy, clamped): equal on
 * every element.  Odd sizes (tails of M, N and K), K = 1, per-channel
 * multipliers and biases, zero points at the ends of the range, u8 and s8
 * activations, u8 / s8 / fp32 outputs, a clamp (fused Relu), the weight as A
 * (NCHW conv form) and as B, K-major and channel-major weights, operands at
 * their extremes with K past 4096, nothing written past the output and
 * nothing read past the activation (a guard page after it);
 * convolutions (im2col per call, B read in place or from phase planes:
 * padding reads the zero point, strides,
 * dilations, 1x1) against a direct conv; the scalar, AVX2 and VNNI variants,
 * the VNNI one also weight-stationary (spec.ws) on every case it takes
 * (each where the CPU has it; AVX2 also built with -mavx2 -mfma alone and
 * checked free of AVX-512 code), threads, -O3; bad specs.
 *
 * Each variant runs every case once in CI: the scalar one at -O0, the best
 * vector one at -O3 (the level harp builds kernels at), AVX2 at -O2 alone,
 * AMX and VNNI beside it at -O2.  HARP_TEST_SLOW=1 also runs the rows those
 * cover (the vector variants at -O0, AVX2 at -O3 beside VNNI).  The
 * sanitizer build (HARP_QGEMM_LIGHT) compiles its kernels without them (no
 * CT_FLAGS: tests/CMakeLists.txt), so it emits every row (the generator
 * under the sanitizers) but compiles and runs only the scalar one: the
 * others would repeat the plain build's run exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend/c/cgen_qgemm.h"
#include "cgen_testutil.h"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define U8 TINY_U8
#define I8 TINY_I8
#define F32 TINY_FP32

typedef struct qcase {
  long m, n, k;
  bool wa, kmaj;
  tiny_dtype xdt, ydt;
  int za, zy, lo, hi;
  int fill; /* 0 random, 1 extremes (x at its top, w = -128 / 127), 2 random with
               multipliers up to 4e4 on two channels in three (|v| past 2^31) */
} qcase;

static const qcase CASES[] = {
    {7, 70, 13, false, false, U8, U8, 0, 255, 0, 255},          /* tails everywhere, zero points at the ends */
    {13, 33, 1, false, true, I8, I8, -128, 127, -128, 127},     /* K = 1, s8 through + 128 */
    {33, 17, 29, true, false, U8, F32, 255, 0, 0, 0},           /* weight as A, fp32 out */
    {64, 200, 256, true, true, U8, U8, 3, 10, 10, 255},         /* a fused Relu (lo = zy), threads */
    {12, 130, 4099, false, false, U8, U8, 0, 0, 0, 255, 1},     /* extremes: |acc| ~ 1.3e8 */
    {6, 16, 4099, true, false, I8, I8, -128, -5, -128, 127, 1},  /* the same, weight as A, s8 */
    {100, 64, 64, false, true, I8, F32, 0, 0, 0, 0},            /* exact blocks */
    {5, 47, 9, true, true, U8, I8, 77, -3, -100, 90},           /* 15 columns past a vector */
    {20, 100, 1001, false, false, U8, U8, 5, 128, 0, 255},      /* depth blocks (K4 past 160), a tail block */
    {30, 150, 37, true, false, I8, U8, -3, 5, 0, 255},          /* weight as A, s8: full B blocks packed 4 rows at a time */
    {5, 64, 8, false, false, U8, U8, 1, 2, 0, 255},             /* u8 A read in place: one block, all of it the copied tail */
    {18, 70, 64, false, true, U8, I8, 250, 0, -128, 127},       /* u8 A in place, whole blocks (the last a copy); s8 rows of 64 */
    {70, 100, 200, false, false, I8, U8, -128, 3, 3, 255},       /* AMX: 3 panels of 32 (the last 6 rows), a 36-column block */
    {45, 33, 70, true, false, U8, I8, 255, -7, -128, 127},     /* AMX, weight A: 2 panels, 33 columns (a half and one more vector) */
    {64, 128, 96, true, false, U8, I8, 9, -3, -100, 90, 2},     /* rows of 64 bytes: s8 clamped inside its range, |v| past 2^31 */
    {40, 192, 70, false, true, I8, U8, -20, 10, 10, 200, 2},    /* the same for u8 (lo = zy, hi < 255), weight as B */
    {200, 70, 1001, true, false, U8, U8, 7, 128, 0, 255},       /* a weight of 200 KB: weight-stationary on VNNI (B whole,
                                                                   2 blocks, the last of 6 columns), K % 4 = 1 */
    {50, 49, 1001, true, false, U8, I8, 3, -2, -128, 100},      /* N = 49 (7x7): the last block as 3 vectors and one
                                                                   column (VNNI), depth blocks, M % 6 = 2 */
    {9, 113, 40, true, true, I8, F32, -5, 0, 0, 0},             /* the same after a full block, fp32 out */
    {13, 17, 300, true, false, U8, U8, 200, 7, 7, 255, 2},      /* one vector and one column, |v| past 2^31 */
    {50, 196, 1001, true, false, U8, I8, 3, -2, -128, 100},     /* N = 196 (14x14): the last block as 4 columns alone (VNNI),
                                                                   depth blocks of 128 and 123 words (odd), M % 6 = 2 */
    {13, 3, 300, true, true, U8, U8, 200, 7, 7, 200, 2},        /* 3 columns alone, one block of 75 words, |v| past 2^31 */
    {9, 66, 40, true, false, I8, F32, -5, 0, 0, 0},             /* 2 columns after a full block, fp32 out */
    {12, 4, 64, true, false, I8, I8, -3, 5, -100, 127, 1},      /* 4 columns alone, extremes, s8 */
};
#define NCASE ((int)(sizeof CASES / sizeof CASES[0]))

/* Convolutions: cout, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, dtypes, zero points, clamp. */
typedef struct ccase {
  long co, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw;
  tiny_dtype xdt, ydt;
  int za, zy, lo, hi;
} ccase;

static const ccase CCASES[] = {
    {13, 5, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, U8, U8, 200, 3, 0, 255},          /* 3x3 pad 1, padding reads za */
    {8, 16, 11, 10, 3, 3, 2, 2, 1, 1, 1, 1, I8, I8, -128, 1, -128, 127},    /* stride 2, s8 */
    {17, 33, 6, 6, 1, 1, 1, 1, 0, 0, 1, 1, U8, F32, 0, 0, 0, 0},            /* 1x1 */
    {7, 3, 13, 8, 5, 3, 2, 1, 2, 1, 2, 1, U8, U8, 255, 40, 40, 255},        /* dilation, mixed strides, Relu */
    {64, 64, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, U8, U8, 9, 128, 0, 255},       /* threads */
    {20, 9, 12, 20, 3, 3, 1, 1, 1, 1, 1, 1, I8, U8, -100, 10, 0, 255},     /* s8 read in place: full blocks, K % 4 = 1 */
    {16, 7, 9, 70, 3, 3, 1, 1, 1, 1, 2, 2, I8, I8, 5, 0, -128, 127},        /* dilation 2 read in place, 2 full blocks */
    {5, 3, 11, 9, 3, 3, 1, 1, 1, 1, 1, 1, U8, F32, 255, 0, 0, 0},        /* OW = W: B read from x, masked (qg_dims.ci) */
    {5, 3, 9, 7, 3, 3, 1, 1, 2, 2, 1, 1, U8, F32, 255, 0, 0, 0},          /* padded copy, Wp 11: the last row's 8 columns from
                                                                             q = 112 end at OW (AVX2: a store past them ends past y) */
    {16, 3, 23, 21, 7, 7, 2, 2, 3, 3, 1, 1, U8, U8, 125, 0, 0, 255},      /* a stem: C_in 3, 7x7/2 pad 3, OW = ceil(W / 2):
                                                                             B from the phase planes (qg_dims.ps), rows of 11,
                                                                             K = 147 unrolled, a partial last word */
    {8, 3, 15, 17, 3, 3, 2, 2, 0, 0, 1, 1, I8, U8, 10, 2, 0, 255},        /* C_in 3, 3x3/2 unpadded (OW < ceil(W / 2)): B
                                                                             gathered from the padded image (qg_dims.pg) */
    {9, 4, 30, 67, 3, 3, 2, 2, 1, 1, 1, 1, I8, I8, -7, 3, -128, 127},     /* the same, s8, rows of 34 (a block spans 3) */
    {70, 64, 10, 13, 1, 1, 1, 1, 0, 0, 1, 1, U8, U8, 7, 0, 0, 255},       /* 1x1 unpadded: the GEMM of the image, 130 pixels */
    {40, 256, 7, 19, 1, 1, 1, 1, 0, 0, 3, 2, I8, U8, -9, 4, 4, 255},      /* the same, K = 256, dilations (no effect), 133 pixels */
    {9, 5, 4, 6, 1, 1, 1, 1, 1, 1, 1, 1, U8, U8, 200, 3, 0, 255},         /* 1x1 padded: still a conv (its border reads za) */
    {12, 16, 9, 11, 1, 1, 2, 2, 0, 0, 1, 1, U8, U8, 3, 0, 0, 255},        /* 1x1 stride 2: still a conv (its im2col) */
    {24, 32, 15, 13, 3, 3, 2, 2, 1, 1, 1, 1, U8, U8, 77, 5, 0, 255},      /* 3x3/2, 32 channels (the im2col) */
    {10, 8, 7, 70, 1, 1, 3, 3, 0, 0, 1, 1, I8, U8, -3, 9, 0, 255},        /* 1x1/3, rows of 24 */
    {33, 20, 12, 150, 2, 2, 2, 2, 0, 0, 1, 1, U8, I8, 250, -4, -128, 127}, /* 2x2/2, rows of 75 (a block in one row) */
    {16, 64, 7, 7, 1, 1, 2, 2, 0, 0, 1, 1, U8, U8, 0, 128, 0, 255},       /* 1x1/2 at 7x7 -> 4x4: one block */
    /* stride 1, OW = W (qg_dims.ci): B's rows read from x, the pixels off the image masked to za */
    {11, 6, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, U8, U8, 0, 5, 0, 255},          /* 35 pixels: one partial block over 5 rows */
    {9, 5, 10, 9, 3, 1, 1, 1, 0, 0, 1, 1, I8, U8, 127, 2, 0, 255},        /* 3x1 unpadded: OH = 8, s8 */
    {7, 4, 9, 13, 5, 5, 1, 1, 2, 2, 1, 1, U8, I8, 255, -3, -128, 127},    /* 5x5 pad 2, za 255 */
    {6, 3, 8, 11, 3, 3, 1, 1, 0, 2, 2, 2, U8, U8, 128, 0, 0, 255},        /* dilation 2, pad 0 x 2: OH = 4 */
    {32, 64, 9, 66, 3, 3, 1, 1, 1, 1, 1, 1, U8, U8, 100, 1, 0, 255},      /* rows of 66: whole blocks in place, K4 144 */
    /* strided, OW = ceil(W / sw), every phase read (qg_dims.ps): B's rows from the phase planes, masked
       (and above: the 3x3/2 s8 at 11x10, the 3x3/2 at 15x13, the 2x2/2 at rows of 150) */
    {20, 24, 9, 31, 3, 3, 2, 1, 1, 1, 1, 1, U8, U8, 50, 2, 0, 255},       /* stride 2 x 1: row phases only (sw 1: the plain split) */
    {12, 10, 10, 17, 3, 3, 3, 3, 1, 1, 1, 1, I8, U8, -60, 4, 0, 255},     /* 3x3/3: 9 planes of 4 x 6, the last row and column short */
    {40, 64, 31, 35, 3, 3, 2, 2, 1, 1, 1, 1, U8, U8, 255, 0, 0, 255},     /* 3x3/2, 64 channels, 16 x 18: 5 blocks, za 255 */
    {9, 6, 13, 261, 5, 5, 2, 2, 2, 2, 1, 1, U8, I8, 1, -5, -128, 127},    /* 5x5/2 pad 2, rows of 261: split 128 at a time, odd tail */
    {200, 1000, 5, 5, 1, 1, 2, 2, 0, 0, 1, 1, U8, U8, 3, 0, 0, 255},      /* 1x1/2, a weight of 200 KB: weight-stationary on
                                                                             VNNI over the im2col, 9 pixels */
    {14, 32, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, U8, U8, 5, 3, 0, 255},         /* 3x3 at 7x7 read in place: 49 pixels, 3 vectors
                                                                             and one column */
    {22, 40, 13, 13, 1, 1, 2, 2, 0, 0, 1, 1, I8, I8, -1, 6, -128, 127},   /* 1x1/2 to 7x7 (the im2col), the same */
};
#define NCCASE ((int)(sizeof CCASES / sizeof CCASES[0]))

static long out_h(const ccase *c) { return (c->h + 2 * c->ph - c->dh * (c->kh - 1) - 1) / c->sh + 1; }
static long out_w(const ccase *c) { return (c->w + 2 * c->pw - c->dw * (c->kw - 1) - 1) / c->sw + 1; }

static void make_spec(const qcase *c, int isa, cgen_qgemm_spec *s);

/* Conv case i as the qcase of its GEMM (for the data and the store). */
static qcase gemm_of(const ccase *c) {
  return (qcase){c->co, out_h(c) * out_w(c), c->c * c->kh * c->kw, true, false, c->xdt, c->ydt, c->za, c->zy, c->lo, c->hi, 0};
}

static void make_cspec(const ccase *c, int isa, cgen_qgemm_spec *s) {
  qcase g = gemm_of(c);
  make_spec(&g, isa, s);
  s->conv.c = c->c, s->conv.h = c->h, s->conv.w = c->w, s->conv.kh = c->kh, s->conv.kw = c->kw;
  s->conv.sh = c->sh, s->conv.sw = c->sw, s->conv.ph = c->ph, s->conv.pw = c->pw, s->conv.dh = c->dh, s->conv.dw = c->dw;
}

/* The spec of case i of CASES then CCASES, variant isa forced (-1: none). */
static void case_spec(int i, int isa, cgen_qgemm_spec *s) {
  if (i < NCASE) make_spec(&CASES[i], isa, s);
  else make_cspec(&CCASES[i - NCASE], isa, s);
}

typedef int (*qg_fn)(hprt_pool *, const void *, const void *, void *);
typedef long (*qg_size)(void);
typedef int (*qg_pack)(const int8_t *, const int32_t *, const float *, void *);

static void make_spec(const qcase *c, int isa, cgen_qgemm_spec *s) {
  cgen_qgemm_spec_init(s, c->m, c->n, c->k);
  s->weight_a = c->wa, s->w_kmajor = c->kmaj;
  s->x_dtype = c->xdt, s->y_dtype = c->ydt;
  s->za = c->za, s->zy = c->zy, s->lo = c->lo, s->hi = c->hi;
  s->force_isa = isa;
}

/* The case's data: x (activation bytes), w (s8), bias, mult. */
typedef struct qdata {
  uint8_t *x;
  void *xmap; /* x ends where a PROT_NONE page starts: a read past it faults */
  size_t xlen;
  int8_t *w;
  int32_t *bias;
  float *mult;
} qdata;

static void make_data(const qcase *c, qdata *d, long xbytes) {
  long xr = xbytes > 0 ? xbytes : c->wa ? c->k * c->n : c->m * c->k, ch = c->wa ? c->m : c->n;
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), body = ((size_t)xr + pg - 1) / pg * pg;
  d->xlen = body + pg;
  d->xmap = mmap(NULL, d->xlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(d->xmap != MAP_FAILED);
  assert_int_equal(mprotect((char *)d->xmap + body, pg, PROT_NONE), 0);
  d->x = (uint8_t *)d->xmap + body - xr;
  d->w = malloc((size_t)(ch * c->k));
  d->bias = malloc((size_t)ch * 4);
  d->mult = malloc((size_t)ch * 4);
  for (long i = 0; i < xr; i++) {
    ct_rand();
    d->x[i] = c->fill == 1 ? (c->xdt == I8 ? 127 : 255) : (uint8_t)(ct_seed >> 16);
  }
  for (long i = 0; i < ch * c->k; i++) {
    ct_rand();
    d->w[i] = c->fill == 1 ? (int8_t)(i % 3 ? -128 : 127) : (int8_t)(ct_seed >> 16);
  }
  for (long i = 0; i < ch; i++) {
    d->bias[i] = (int32_t)(ct_rand() * 20000.0f);
    /* wide enough to saturate some, fine enough to keep some */
    d->mult[i] = c->ydt == F32 ? 0.001f * (1.5f + ct_rand()) : (1e-3f + 4e-3f * (1.0f + ct_rand())) / (float)(c->k < 64 ? 1 : c->k / 64);
    if (c->fill == 1) d->mult[i] = 1e-6f * (float)(i + 1);
    if (c->fill == 2 && i % 3) d->mult[i] = 2e4f * (1.0f + ct_rand());
  }
  ct_seed += 7;
}

static void free_data(qdata *d) { munmap(d->xmap, d->xlen), free(d->w), free(d->bias), free(d->mult); }

static float requant(const qcase *c, const qdata *d, int64_t acc, long ch);

/* The reference's element (i, j) as float (the stored value). */
static float ref_at(const qcase *c, const qdata *d, long i, long j) {
  long ch = c->wa ? i : j, chs = c->wa ? c->m : c->n;
  int64_t acc = 0;
  for (long k = 0; k < c->k; k++) {
    int xv = c->wa ? d->x[k * c->n + j] : d->x[i * c->k + k];
    if (c->xdt == I8) xv = (int8_t)xv;
    int wv = c->kmaj ? d->w[k * chs + ch] : d->w[ch * c->k + k];
    acc += (int64_t)(xv - c->za) * wv;
  }
  return requant(c, d, acc, ch);
}

/* The requantized value of sum acc of channel ch. */
static float requant(const qcase *c, const qdata *d, int64_t acc, long ch) {
  float v = (float)(int32_t)(acc + d->bias[ch]) * d->mult[ch];
  if (c->ydt == F32) return v;
  long r = lrintf(v) + c->zy;
  return (float)(r < c->lo ? c->lo : r > c->hi ? c->hi : r);
}

/* The conv reference's output (co, oy, ox): padding contributes 0. */
static float cref_at(const ccase *cc, const qcase *c, const qdata *d, long co, long oy, long ox) {
  int64_t acc = 0;
  for (long ci = 0; ci < cc->c; ci++)
    for (long ky = 0; ky < cc->kh; ky++)
      for (long kx = 0; kx < cc->kw; kx++) {
        long iy = oy * cc->sh - cc->ph + ky * cc->dh, ix = ox * cc->sw - cc->pw + kx * cc->dw;
        if (iy < 0 || iy >= cc->h || ix < 0 || ix >= cc->w) continue;
        int xv = d->x[(ci * cc->h + iy) * cc->w + ix];
        if (c->xdt == I8) xv = (int8_t)xv;
        acc += (int64_t)(xv - c->za) * d->w[((co * cc->c + ci) * cc->kh + ky) * cc->kw + kx];
      }
  return requant(c, d, acc, co);
}

static float got_at(const qcase *c, const void *y, long i) {
  return c->ydt == F32 ? ((const float *)y)[i] : c->ydt == I8 ? (float)((const int8_t *)y)[i] : (float)((const uint8_t *)y)[i];
}

/* Runs case idx of the compiled batch h; the number of elements that differ. */
static long run_case(void *h, int idx, const char *tag, hprt_pool *pool) {
  const ccase *cc = idx >= NCASE ? &CCASES[idx - NCASE] : NULL;
  qcase cg = cc ? gemm_of(cc) : CASES[idx];
  const qcase *c = &cg;
  char name[48];
  snprintf(name, sizeof name, "q%s%d_wsize", tag, idx);
  qg_size wsize = (qg_size)dlsym(h, name);
  snprintf(name, sizeof name, "q%s%d_pack", tag, idx);
  qg_pack pack = (qg_pack)dlsym(h, name);
  snprintf(name, sizeof name, "q%s%d", tag, idx);
  qg_fn fn = (qg_fn)dlsym(h, name);
  if (!wsize || !pack || !fn) return -1;
  qdata d;
  make_data(c, &d, cc ? cc->c * cc->h * cc->w : 0);
  void *wp = aligned_alloc(64, ((size_t)wsize() + 63) & ~(size_t)63);
  memset(wp, 0xa5, (size_t)wsize()); /* the packer writes all it reads (its padding too) */
  long ny = c->m * c->n, ysz = c->ydt == F32 ? 4 : 1, bad = 0;
  char *y = malloc((size_t)(ny * ysz + 64));
  memset(y, 0x5a, (size_t)(ny * ysz + 64)); /* poison, and a guard past the end */
  if (pack(d.w, d.bias, d.mult, wp) || fn(pool, wp, d.x, y)) bad = -1;
  for (long i = 0; i < c->m && bad >= 0; i++)
    for (long j = 0; j < c->n; j++) {
      float want = cc ? cref_at(cc, c, &d, i, j / out_w(cc), j % out_w(cc)) : ref_at(c, &d, i, j);
      float got = got_at(c, y, i * c->n + j);
      if (memcmp(&want, &got, 4) != 0 && bad++ < 5)
        fprintf(stderr, "qgemm %s case %d [%ld][%ld]: got %.9g want %.9g\n", tag, idx, i, j, (double)got, (double)want);
    }
  for (long i = ny * ysz; i < ny * ysz + 64; i++)
    if (y[i] != 0x5a && bad++ < 5) fprintf(stderr, "qgemm %s case %d: wrote past the output\n", tag, idx);
  free(y), free(wp), free_data(&d);
  return bad;
}

static bool has_vnni(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

static bool has_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* HARP_TEST_SLOW=1: also the rows that another row covers (the file's comment). */
static bool slow_rows(void) { return getenv("HARP_TEST_SLOW") && !strcmp(getenv("HARP_TEST_SLOW"), "1"); }

/* Whether a vector row only emits its kernels (the sanitizer build: the
 * file's comment), unless HARP_TEST_SLOW=1. */
static bool emit_only(void) {
#ifdef HARP_QGEMM_LIGHT
  return !slow_rows();
#else
  return false;
#endif
}

/* The variants check_all runs: scalar, AVX2, VNNI (a tag, its force_isa). */
static const char *const VTAG[] = {"s", "a", "v"};
static const int VISA[] = {CGEN_ISA_SCALAR, CGEN_ISA_AVX2, CGEN_ISA_AVX512};

/* Case spec s as function `name` appended to src; novec: its scalar
 * fallback returns -7 instead (a vector variant forced must be the one
 * that runs: a wrong selector fails the case). */
static void emit_case(const cgen_qgemm_spec *s, const char *name, bool novec, ut_str *src) {
  ut_str one;
  ut_str_init(&one);
  harp_error e = {0};
  assert_int_equal(cgen_qgemm(&e, s, name, &one), HARP_OK);
  char call[96];
  snprintf(call, sizeof call, "return %s_scalar_run(pool, wp, x, y);", name);
  const char *p = novec ? strstr(one.buf, call) : NULL;
  assert_true(!novec || p);
  if (p) {
    ut_str_putn(src, one.buf, (size_t)(p - one.buf));
    ut_str_puts(src, "return -7; (void)");
    ut_str_puts(src, p + 7);
  } else
    ut_str_puts(src, one.buf);
  ut_str_free(&one);
}

/* Every case in the variants v0 .. v1 (0 scalar, 1 AVX2, 2 VNNI) that the
 * CPU has, each against the reference bit for bit (so the variants agree
 * with one another bit for bit); a row with a vector variant only emits its
 * kernels where emit_only(). */
static void check_all(const char *flags, int v0, int v1) {
  ut_str src;
  ut_str_init(&src);
  bool on[3] = {true, has_avx2(), has_vnni()};
  if (!on[2]) fprintf(stderr, "no AVX512_VNNI here: the VNNI variant is not run\n");
  if (!on[1]) fprintf(stderr, "no AVX2 here: the AVX2 variant is not run\n");
  if (v0 > 0 && !on[1] && !on[2]) v0 = 0;
  for (int v = v0; v <= v1; v++)
    for (int i = 0; on[v] && i < NCASE + NCCASE; i++) {
      cgen_qgemm_spec s;
      case_spec(i, VISA[v], &s);
      char name[32];
      snprintf(name, sizeof name, "q%s%d", VTAG[v], i);
      emit_case(&s, name, v > 0, &src);
    }
  if (v1 > 0 && emit_only()) {
    ut_str_free(&src);
    return;
  }
  void *h = ct_compile_flags(src.buf, flags);
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 3);
  assert_non_null(pool);
  for (int v = v0; v <= v1; v++)
    for (int i = 0; on[v] && i < NCASE + NCCASE; i++) {
      assert_int_equal(run_case(h, i, VTAG[v], pool), 0);
      assert_int_equal(run_case(h, i, VTAG[v], NULL), 0);
    }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

/* The AVX2 variant's code (forced) holds no AVX-512 instruction: from its
 * first function to the selector no _mm512 intrinsic, zmm register or
 * AVX-512 target; and every case built with -mavx2 -mfma (no -mavx512*)
 * runs it exactly (check_all). */
static void test_cases_avx2(void **st) {
  (void)st;
  if (!has_avx2()) {
    fprintf(stderr, "no AVX2 here: skipped\n");
    return;
  }
  for (int i = 0; i < NCASE + NCCASE; i++) {
    cgen_qgemm_spec s;
    case_spec(i, CGEN_ISA_AVX2, &s);
    ut_str src;
    ut_str_init(&src);
    harp_error e = {0};
    assert_int_equal(cgen_qgemm(&e, &s, "f", &src), HARP_OK);
    const char *a = strstr(src.buf, "f_avx2_st("), *b = strstr(src.buf, "static int f_sel(");
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a < b && strstr(a, "f_avx2_run(") < b);
    for (const char *p = a; p < b; p++)
      assert_false(!strncmp(p, "_mm512", 6) || !strncmp(p, "zmm", 3) || !strncmp(p, "avx512", 6));
    ut_str_free(&src);
  }
  check_all("-O2 -mavx2 -mfma", 1, 1);
}

/* Every case on the AMX variant (spec amx = 2; cgen_qamx.c), which must be
 * the one that runs (F_amx_on), and again with the AVX-512 variant forced
 * beside it (its own packed layout).  Without AMX-INT8 every case is still
 * emitted, and the first one's module compiled (at -O0: that the AMX C
 * compiles here; all of them took 20 s of CPU) and its F_amx_on must say no. */
static void test_cases_amx(void **st) {
  (void)st;
  bool amx = ut_cpu_amx_int8();
  if (!amx) fprintf(stderr, "no AMX-INT8 here (or no permission): the AMX variant emitted and compiled, not run\n");
  ut_str src, first;
  ut_str_init(&src);
  ut_str_init(&first);
  harp_error e = {0};
  for (int v = 0; v < 2; v++)
    for (int i = 0; i < NCASE + NCCASE; i++) {
      cgen_qgemm_spec s;
      case_spec(i, v ? CGEN_ISA_AVX512 : -1, &s);
      s.amx = 2;
      char name[32];
      snprintf(name, sizeof name, "q%s%d", v ? "f" : "a", i);
      assert_int_equal(cgen_qgemm(&e, &s, name, &src), HARP_OK);
      assert_non_null(strstr(src.buf, v ? "qf0_amx_run" : "qa0_amx_run"));
      if (!v && !i) assert_int_equal(cgen_qgemm(&e, &s, name, &first), HARP_OK);
    }
  if (emit_only()) {
    ut_str_free(&src), ut_str_free(&first);
    return;
  }
  void *h = ct_compile_flags(amx ? src.buf : first.buf, getenv("CT_FLAGS") ? getenv("CT_FLAGS") : amx ? "-O2" : "-O0");
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 3);
  assert_non_null(pool);
  for (int v = 0; v < (amx ? 2 : 1); v++)
    for (int i = 0; i < (amx ? NCASE + NCCASE : 1); i++) {
      char name[48];
      snprintf(name, sizeof name, "q%s%d_amx_on", v ? "f" : "a", i);
      int (*on)(void) = (int (*)(void))dlsym(h, name);
      assert_non_null(on);
      assert_int_equal(on(), amx && !v);
      if (!amx) continue;
      assert_int_equal(run_case(h, i, v ? "f" : "a", pool), 0);
      assert_int_equal(run_case(h, i, v ? "f" : "a", NULL), 0);
    }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src), ut_str_free(&first);
}

/* The scalar variant (all three with HARP_TEST_SLOW=1). */
static void test_cases(void **st) {
  (void)st;
  check_all(getenv("CT_FLAGS") ? getenv("CT_FLAGS") : "-O0", 0, slow_rows() ? 2 : 0);
}

/* The best vector variant the CPU has (VNNI, else AVX2; the scalar one where
 * it is all there is); with HARP_TEST_SLOW=1 AVX2 beside VNNI too. */
static void test_cases_o3(void **st) {
  (void)st;
  check_all("-O3", slow_rows() || !has_vnni() ? 1 : 2, 2);
}

/* Which strided convs read B from phase planes ($F_phs, no im2col $F_col):
 * the 3x3/2 pad 1 and the 3x3/3 of CCASES do; a 1x1/2 (one phase read) and
 * a 3x3/2 unpadded (OW = 4 < ceil(10 / 2)) keep the im2col; the AVX-512
 * variant splits a stride-2 row with its own $P_phs. */
static void test_phase_planes(void **st) {
  (void)st;
  static const ccase g[] = {{8, 16, 11, 10, 3, 3, 2, 2, 1, 1, 1, 1, I8, I8, -128, 1, -128, 127},
                            {12, 10, 10, 17, 3, 3, 3, 3, 1, 1, 1, 1, I8, U8, -60, 4, 0, 255},
                            {12, 16, 9, 11, 1, 1, 2, 2, 0, 0, 1, 1, U8, U8, 3, 0, 0, 255},
                            {8, 16, 11, 10, 3, 3, 2, 2, 0, 0, 1, 1, U8, U8, 3, 0, 0, 255}};
  for (int i = 0; i < 4; i++) {
    cgen_qgemm_spec s;
    make_cspec(&g[i], -1, &s);
    ut_str src;
    ut_str_init(&src);
    harp_error e = {0};
    assert_int_equal(cgen_qgemm(&e, &s, "f", &src), HARP_OK);
    assert_int_equal(strstr(src.buf, "f_phs(") != NULL, i < 2);
    assert_int_equal(strstr(src.buf, "f_col(") != NULL, i >= 2);
    assert_int_equal(strstr(src.buf, "f_avx512_phs(") != NULL, i == 0);
    ut_str_free(&src);
  }
}

/* Whether source src's VNNI depth loops ask for A's bytes ahead
 * ("prefetcht0 <n>(%[pa])"): the weight-stationary stream, or the tiles'
 * order's next A block (QG_PFN). */
static bool prefetches_a(const char *src) {
  for (const char *p = strstr(src, "prefetcht0 "); p; p = strstr(p + 1, "prefetcht0 ")) {
    const char *q = p + strlen("prefetcht0 ");
    while (*q >= '0' && *q <= '9') q++;
    if (q > p + strlen("prefetcht0 ") && !strncmp(q, "(%[pa])", 7)) return true;
  }
  return false;
}

/* How source src of function fn packs B in the weight-stationary order:
 * 1 shared (a pool run of fn_avx512_btask, one task a block), 2 per thread
 * (a thread's first task packs every block into its own scratch), 0 not
 * that order; -1 both (never right). */
static int ws_pack(const char *src, const char *fn) {
  char bt[64];
  snprintf(bt, sizeof bt, "%s_avx512_btask(", fn);
  bool shared = strstr(src, bt) != NULL, own = strstr(src, "if (cx->pjb[tid] != 0) {") != NULL;
  return shared && own ? -1 : shared ? 1 : own ? 2 : 0;
}

/* The weight-stationary order (spec.ws, cgen_qgemm.c's qg_ws) of the
 * VNNI variant: chosen by size for the two cases of a 200 KB weight alone,
 * never with ws -1 (the tiles' order then asks for the next A block's
 * bytes ahead where the weight is A and at least 64 KiB: the same two
 * cases); and forced (ws 1) on every case whose weight is A (B packed
 * whole, per thread where it is at most 4 blocks (QG_WS_OWN), else shared
 * by $P_btask: tails of M, N and K, the convs' images, a single block,
 * many), each against the reference, on 3 threads and on none.  Skipped
 * without VNNI. */
static void test_cases_ws(void **st) {
  (void)st;
  if (!has_vnni()) {
    fprintf(stderr, "no AVX512_VNNI here: skipped\n");
    return;
  }
  ut_str src;
  ut_str_init(&src);
  bool run[NCASE + NCCASE];
  int kinds = 0; /* bit 1: a B shared, bit 2: a B per thread */
  for (int i = 0; i < NCASE + NCCASE; i++) {
    cgen_qgemm_spec s;
    case_spec(i, CGEN_ISA_AVX512, &s);
    run[i] = s.weight_a;
    bool big = s.weight_a && s.m * s.k >= 200 * 1000;
    for (int ws = -1; ws <= 0; ws++) { /* by size: the two big cases only; -1: none */
      s.ws = ws;
      ut_str one;
      ut_str_init(&one);
      harp_error e = {0};
      assert_int_equal(cgen_qgemm(&e, &s, "f", &one), HARP_OK);
      assert_int_equal(ws_pack(one.buf, "f"), big && ws == 0 ? 2 : 0); /* 2 and 1 blocks: per thread */
      if (ws < 0) assert_int_equal(prefetches_a(one.buf), s.weight_a && s.m * s.k >= 65536);
      ut_str_free(&one);
    }
    if (!run[i]) continue;
    s.ws = 1;
    char name[32];
    snprintf(name, sizeof name, "qw%d", i);
    emit_case(&s, name, true, &src);
    ut_str one;
    ut_str_init(&one);
    harp_error e = {0};
    assert_int_equal(cgen_qgemm(&e, &s, name, &one), HARP_OK);
    int how = ws_pack(one.buf, name);
    if (s.conv.kh > 0) assert_true(how == 1 || how == 2); /* a conv's blocks may be over its padded-width grid */
    else assert_int_equal(how, (s.n + 63) / 64 <= 4 ? 2 : 1);
    kinds |= 1 << how;
    ut_str_free(&one);
  }
  assert_int_equal(kinds, 6); /* both ways run */
  if (emit_only()) {
    ut_str_free(&src);
    return;
  }
  void *h = ct_compile_flags(src.buf, getenv("CT_FLAGS") ? getenv("CT_FLAGS") : "-O2");
  assert_non_null(h);
  hprt_pool *pool = ct_pool_create(h, 3);
  assert_non_null(pool);
  for (int i = 0; i < NCASE + NCCASE; i++) {
    if (!run[i]) continue;
    assert_int_equal(run_case(h, i, "w", pool), 0);
    assert_int_equal(run_case(h, i, "w", NULL), 0);
  }
  ct_pool_destroy(h, pool);
  dlclose(h);
  ut_str_free(&src);
}

/* One bad call (spec s, name fn): the status, a message, nothing emitted;
 * then s back to a good 4 x 4 x 4 spec. */
static void bad_fn(cgen_qgemm_spec *s, const char *fn, harp_status want) {
  ut_str src;
  ut_str_init(&src);
  harp_error e;
  memset(&e, 0, sizeof e);
  assert_int_equal(cgen_qgemm(&e, s, fn, &src), want);
  assert_true(e.msg[0] != 0);
  assert_int_equal(src.len, 0);
  ut_str_free(&src);
  if (s) cgen_qgemm_spec_init(s, 4, 4, 4);
}
static void bad(cgen_qgemm_spec *s, harp_status want) { bad_fn(s, "f", want); }

static void test_errors(void **st) {
  (void)st;
  cgen_qgemm_spec s;
  cgen_qgemm_spec_init(&s, 4, 0, 4);
  bad(&s, HARP_E_INVALID_ARG);
  s.k = 65537;
  bad(&s, HARP_E_LIMIT);
  s.x_dtype = F32;
  bad(&s, HARP_E_UNSUPPORTED);
  s.y_dtype = TINY_FP16;
  bad(&s, HARP_E_UNSUPPORTED);
  s.za = 256;
  bad(&s, HARP_E_INVALID_ARG);
  s.x_dtype = I8, s.za = 128;
  bad(&s, HARP_E_INVALID_ARG);
  s.zy = 5, s.lo = 6;
  bad(&s, HARP_E_INVALID_ARG);
  s.y_dtype = I8, s.zy = 0, s.lo = -129, s.hi = 0;
  bad(&s, HARP_E_INVALID_ARG);
  s.force_isa = CGEN_ISA_COUNT;
  bad(&s, HARP_E_INVALID_ARG);
  s.amx = 3;
  bad(&s, HARP_E_INVALID_ARG);
  s.ws = 2;
  bad(&s, HARP_E_INVALID_ARG);
  s.weight_a = true, s.n = 9, s.k = 18, s.conv.c = 2, s.conv.h = s.conv.w = 3, s.conv.kh = s.conv.kw = 3;
  s.conv.sh = s.conv.sw = s.conv.dh = s.conv.dw = 1, s.conv.ph = s.conv.pw = 1;
  s.k = 17; /* not c kh kw */
  bad(&s, HARP_E_INVALID_ARG);
  s.weight_a = true, s.n = 9, s.k = 18, s.conv.c = 2, s.conv.h = s.conv.w = 3, s.conv.kh = s.conv.kw = 3;
  s.conv.sh = s.conv.sw = s.conv.dh = s.conv.dw = 1, s.conv.ph = s.conv.pw = 1;
  s.conv.sh = 0; /* a zero stride */
  bad(&s, HARP_E_INVALID_ARG);
  s.weight_a = false, s.n = 9, s.k = 18, s.conv.c = 2, s.conv.h = s.conv.w = 3, s.conv.kh = s.conv.kw = 3;
  s.conv.sh = s.conv.sw = s.conv.dh = s.conv.dw = 1, s.conv.ph = s.conv.pw = 1; /* the weight as B */
  bad(&s, HARP_E_INVALID_ARG);
  bad_fn(NULL, "f", HARP_E_INVALID_ARG);
  bad_fn(&s, "f-1", HARP_E_INVALID_ARG); /* not a C identifier */
  ut_str ok;
  ut_str_init(&ok);
  harp_error e = {0};
  assert_int_equal(cgen_qgemm(&e, &s, "f", &ok), HARP_OK); /* the spec bad_fn left */
  assert_true(ok.len > 0);
  ut_str_free(&ok);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_cases_o3),
      cmocka_unit_test(test_cases_amx),
      cmocka_unit_test(test_phase_planes),
      cmocka_unit_test(test_cases_avx2),
      cmocka_unit_test(test_cases_ws),
  };
  if (getenv("HARP_QGEMM_ONLY")) cmocka_set_test_filter(getenv("HARP_QGEMM_ONLY")); /* one test, e.g. test_cases_avx2 */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
