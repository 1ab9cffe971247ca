/* test_cuda_layout.c — the thread -> element mappings of the SM80 template,
 * simulated in plain C against a naive matmul (no compiler, no GPU).
 *
 * Written from the PTX ISA's tables (9.7.14.5.8: mma.m16n8k16 A/B/C
 * fragments for .f16/.bf16; 9.7.14.5.15: ldmatrix .m8n8 .x4 [.trans]) and
 * the addressing formulas documented in src/backend/cuda/cuda_mma.c:
 *   - the four SMEM operand layouts (A K-major / M-major, B N-major / K-major)
 *     loaded with ldmatrix.x4 through the XOR swizzle give fragments whose
 *     mma.sync product equals the matmul of the tiles;
 *   - the swizzle is a permutation of the 16-byte chunks of every row, and
 *     every 8x8 ldmatrix phase of every access pattern touches 8 distinct
 *     bank groups (no conflicts), for every tile width the template accepts;
 *   - the accumulators of n8 fragments 2kk, 2kk+1 are the A fragment of
 *     k-step kk (attention's S -> P register hand-off);
 *   - the Epilogue's (row, col) of each accumulator element covers each
 *     16x8 fragment exactly once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* ---- the PTX ISA semantics ---------------------------------------------------------- */
/* ldmatrix .x4: lanes 8i..8i+7 give the row addresses of matrix i; lane t
 * gets register i = {row t/4, cols 2(t%4), 2(t%4)+1} (low half = lower
 * column); .trans: {rows 2(t%4), 2(t%4)+1 of column t/4}. */
static void ldmatrix_x4(const uint16_t *smem, const int addr[32], bool trans, uint32_t out[32][4]) {
  for (int m = 0; m < 4; m++)
    for (int t = 0; t < 32; t++) {
      uint16_t lo, hi;
      if (!trans) {
        lo = smem[(addr[8 * m + t / 4] >> 1) + 2 * (t % 4)];
        hi = smem[(addr[8 * m + t / 4] >> 1) + 2 * (t % 4) + 1];
      } else {
        lo = smem[(addr[8 * m + 2 * (t % 4)] >> 1) + t / 4];
        hi = smem[(addr[8 * m + 2 * (t % 4) + 1] >> 1) + t / 4];
      }
      out[t][m] = (uint32_t)lo | (uint32_t)hi << 16;
    }
}

/* mma.m16n8k16 with small integer "halves" (values are exact in fp32). */
static void mma_16816(const uint32_t a[32][4], const uint32_t b[32][2], float c[32][4]) {
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, t = l & 3;
    for (int i = 0; i < 8; i++) { /* a0..a7: row g for i in {0,1,4,5}, else g+8; col 2t + (i&1) (+8 for i >= 4) */
      int row = g + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0), col = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
      A[row][col] = (float)(int16_t)(a[l][i / 2] >> (16 * (i & 1)));
    }
    for (int i = 0; i < 4; i++) /* b0..b3: row 2t + (i&1) (+8 for i >= 2), col g */
      B[2 * t + (i & 1) + (i >= 2 ? 8 : 0)][g] = (float)(int16_t)(b[l][i / 2] >> (16 * (i & 1)));
    for (int i = 0; i < 4; i++) C[g + (i >= 2 ? 8 : 0)][2 * t + (i & 1)] = c[l][i];
  }
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) {
      float s = C[i][j];
      for (int k = 0; k < 16; k++) s += A[i][k] * B[k][j];
      C[i][j] = s;
    }
  for (int l = 0; l < 32; l++)
    for (int i = 0; i < 4; i++) c[l][i] = C[(l >> 2) + (i >= 2 ? 8 : 0)][2 * (l & 3) + (i & 1)];
}

/* ---- the template's formulas ------------------------------------------------------------ */
static int swz_g(int cols, int r) {
  int cpr = cols / 8;
  if (cpr >= 8) return r & 7;
  if (cpr == 4) return (r >> 1) & 3;
  if (cpr == 2) return (r >> 2) & 1;
  return 0;
}
/* byte offset of element (r, c) in a tile with `cols` contiguous 16-bit columns */
static int swz_off(int cols, int r, int c) { return r * cols * 2 + (((c >> 3) ^ swz_g(cols, r)) << 4) + (c & 7) * 2; }

enum { A_KMAJ, A_MMAJ, B_NMAJ, B_KMAJ };

/* The row/col of the SMEM tile that lane l addresses for fragment `f`
 * (m16 fragment of A, or pair of n8 fragments of B) at k-step kk. */
static void frag_rc(int layout, int l, int base, int kk, int *r, int *c) {
  int mat = l >> 3, rr = l & 7;
  switch (layout) {
  case A_KMAJ: *r = base + (mat & 1) * 8 + rr, *c = kk * 16 + (mat >> 1) * 8; break;
  case A_MMAJ: *r = kk * 16 + (mat >> 1) * 8 + rr, *c = base + (mat & 1) * 8; break;
  case B_NMAJ: *r = kk * 16 + (mat & 1) * 8 + rr, *c = base + (mat >> 1) * 8; break;
  default: *r = base + (mat >> 1) * 8 + rr, *c = kk * 16 + (mat & 1) * 8; break;
  }
}

/* Full warp tile product: A tile (MT x KT), B tile (KT x NT) stored in the
 * given layouts, swizzled, one warp computing an MT x NT tile (MT, NT
 * multiples of 16, KT of 16), compared with the naive product. */
static void check_warp_tile(int a_layout, int b_layout, int MT, int NT, int KT) {
  static int16_t A[64][128], B[128][64];
  static uint16_t sa[64 * 128], sb[128 * 64];
  for (int m = 0; m < MT; m++)
    for (int k = 0; k < KT; k++) A[m][k] = (int16_t)((m * 7 + k * 3) % 11 - 5);
  for (int k = 0; k < KT; k++)
    for (int n = 0; n < NT; n++) B[k][n] = (int16_t)((k * 5 + n * 13) % 9 - 4);
  int a_cols = a_layout == A_KMAJ ? KT : MT, b_cols = b_layout == B_KMAJ ? KT : NT;
  memset(sa, 0xFF, sizeof sa);
  memset(sb, 0xFF, sizeof sb);
  for (int m = 0; m < MT; m++)
    for (int k = 0; k < KT; k++) {
      int off = a_layout == A_KMAJ ? swz_off(a_cols, m, k) : swz_off(a_cols, k, m);
      sa[off / 2] = (uint16_t)A[m][k];
    }
  for (int k = 0; k < KT; k++)
    for (int n = 0; n < NT; n++) {
      int off = b_layout == B_KMAJ ? swz_off(b_cols, n, k) : swz_off(b_cols, k, n);
      sb[off / 2] = (uint16_t)B[k][n];
    }
  static float acc[4][8][32][4];
  memset(acc, 0, sizeof acc);
  int MF = MT / 16, NF = NT / 8;
  for (int kk = 0; kk < KT / 16; kk++) {
    uint32_t af[4][32][4], bf[8][32][2];
    for (int i = 0; i < MF; i++) {
      int addr[32];
      for (int l = 0; l < 32; l++) {
        int r, c;
        frag_rc(a_layout, l, i * 16, kk, &r, &c);
        addr[l] = swz_off(a_cols, r, c);
      }
      ldmatrix_x4(sa, addr, a_layout == A_MMAJ, af[i]);
    }
    for (int jp = 0; jp < NF / 2; jp++) {
      int addr[32];
      uint32_t t4[32][4];
      for (int l = 0; l < 32; l++) {
        int r, c;
        frag_rc(b_layout, l, jp * 16, kk, &r, &c);
        addr[l] = swz_off(b_cols, r, c);
      }
      ldmatrix_x4(sb, addr, b_layout == B_NMAJ, t4);
      for (int l = 0; l < 32; l++) { /* d0 d1 -> fragment 2jp, d2 d3 -> 2jp+1 (bf[NF][2] contiguous) */
        bf[2 * jp][l][0] = t4[l][0], bf[2 * jp][l][1] = t4[l][1];
        bf[2 * jp + 1][l][0] = t4[l][2], bf[2 * jp + 1][l][1] = t4[l][3];
      }
    }
    for (int i = 0; i < MF; i++)
      for (int j = 0; j < NF; j++) mma_16816(af[i], bf[j], acc[i][j]);
  }
  for (int i = 0; i < MF; i++)
    for (int j = 0; j < NF; j++)
      for (int l = 0; l < 32; l++)
        for (int h = 0; h < 4; h++) {
          int m = i * 16 + (l >> 2) + (h >= 2 ? 8 : 0), n = j * 8 + 2 * (l & 3) + (h & 1);
          float want = 0;
          for (int k = 0; k < KT; k++) want += (float)A[m][k] * B[k][n];
          if (acc[i][j][l][h] != want)
            fail_msg("layouts A%d B%d %dx%dx%d: C[%d][%d] = %g, want %g", a_layout, b_layout, MT, NT, KT, m, n,
                     (double)acc[i][j][l][h], (double)want);
        }
}

static void test_fragments_all_layouts(void **s) {
  (void)s;
  int shapes[][3] = {{32, 32, 32}, {64, 64, 64}, {16, 16, 16}, {32, 64, 128}, {64, 32, 16}};
  for (int a = A_KMAJ; a <= A_MMAJ; a++)
    for (int b = B_NMAJ; b <= B_KMAJ; b++)
      for (int i = 0; i < 5; i++) check_warp_tile(a, b, shapes[i][0], shapes[i][1], shapes[i][2]);
}

/* The swizzle permutes each row's chunks and keeps every ldmatrix phase
 * conflict-free, for every width the template accepts and every access
 * pattern / fragment offset. */
static void test_swizzle_conflict_free(void **s) {
  (void)s;
  int widths[] = {16, 32, 64, 128, 256};
  for (int wi = 0; wi < 5; wi++) {
    int cols = widths[wi], cpr = cols / 8;
    for (int r = 0; r < 64; r++) {
      int seen[64] = {0};
      for (int c = 0; c < cpr; c++) {
        int p = (swz_off(cols, r, c * 8) - r * cols * 2) / 16;
        assert_true(p >= 0 && p < cpr);
        assert_int_equal(seen[p]++, 0);
      }
    }
    for (int layout = A_KMAJ; layout <= B_KMAJ; layout++) {
      /* rows run along the tile's strided dimension: up to 64 rows; the
       * fragment base walks the contiguous (or row) dimension */
      bool kmajor = layout == A_KMAJ || layout == B_KMAJ;
      int nbase = kmajor ? 64 / 16 : cols / 16, nkk = kmajor ? cols / 16 : 64 / 16;
      for (int base = 0; base < nbase; base++)
        for (int kk = 0; kk < nkk; kk++)
          for (int mat = 0; mat < 4; mat++) {
            int bank[8] = {0};
            for (int rr = 0; rr < 8; rr++) {
              int r, c;
              frag_rc(layout, mat * 8 + rr, base * 16, kk, &r, &c);
              int g = (swz_off(cols, r, c) / 16) % 8;
              if (bank[g]++) fail_msg("width %d layout %d: ldmatrix phase hits bank group %d twice", cols, layout, g);
            }
          }
    }
  }
}

/* Without the swizzle the same accesses conflict (so the check above can fail). */
static void test_plain_layout_conflicts(void **s) {
  (void)s;
  int cols = 64, worst = 1;
  for (int mat = 0; mat < 4; mat++) {
    int bank[8] = {0};
    for (int rr = 0; rr < 8; rr++) {
      int r, c;
      frag_rc(A_KMAJ, mat * 8 + rr, 0, 0, &r, &c);
      int g = ((r * cols * 2 + c * 2) / 16) % 8;
      if (++bank[g] > worst) worst = bank[g];
    }
  }
  assert_int_equal(worst, 8); /* 8-way: every row starts at the same bank group */
}

/* Attention: accumulators of n8 fragments 2kk, 2kk+1 packed as
 * {c0c1(2kk), c2c3(2kk), c0c1(2kk+1), c2c3(2kk+1)} are the A fragment of
 * the 16x16 block at k-step kk. */
static void test_accumulator_is_a_fragment(void **s) {
  (void)s;
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, t = l & 3;
    for (int reg = 0; reg < 4; reg++)
      for (int h = 0; h < 2; h++) {
        /* where the A layout wants register `reg`, half h */
        int i = reg * 2 + h;
        int arow = g + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0), acol = 2 * t + (i & 1) + (i >= 4 ? 8 : 0);
        /* where the packed accumulator element sits */
        int frag = reg >> 1, ci = (reg & 1) * 2 + h; /* c0c1 for even reg, c2c3 for odd */
        int crow = g + (ci >= 2 ? 8 : 0), ccol = frag * 8 + 2 * t + (ci & 1);
        assert_int_equal(arow, crow);
        assert_int_equal(acol, ccol);
      }
  }
}

/* Epilogue coordinates: hk_r = i*16 + g + 8h, hk_c = j*8 + 2t (+1) cover
 * each 16x8 fragment once (and agree with the C layout of the PTX table). */
static void test_epilogue_coordinates(void **s) {
  (void)s;
  int hits[16][8] = {{0}};
  for (int l = 0; l < 32; l++)
    for (int h = 0; h < 2; h++)
      for (int e = 0; e < 2; e++) {
        int r = (l >> 2) + h * 8, c = (l & 3) * 2 + e;
        int reg = h * 2 + e; /* acc[..][h*2 + e] */
        assert_int_equal(r, (l >> 2) + (reg >= 2 ? 8 : 0));
        assert_int_equal(c, 2 * (l & 3) + (reg & 1));
        hits[r][c]++;
      }
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 8; c++) assert_int_equal(hits[r][c], 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fragments_all_layouts),    cmocka_unit_test(test_swizzle_conflict_free),
      cmocka_unit_test(test_plain_layout_conflicts),   cmocka_unit_test(test_accumulator_is_a_fragment),
      cmocka_unit_test(test_epilogue_coordinates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
