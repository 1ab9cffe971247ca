/* cuda_attn.c — attention on the SM80 MMA template (seed 000 §7.3).
 * Needs: cuda.h, cuda_int.h.  Gives: cuda_gen_attn.
 *
 * One CTA = BM query rows of one (batch, head), 4 warps x 16 rows.  Q is
 * staged once (cp.async) and kept as A fragments in registers; K and V tiles
 * of BN keys stream through a 2-stage cp.async ring.  Both matmuls are
 * mma.sync m16n8k16 with fp32 accumulators:
 *   S = Q K^T: K tile [BN][D] is a K-major B operand (ldmatrix, no .trans);
 *   O += P V:  V tile [BN][DV] is an N-major B operand (ldmatrix.trans).
 * S never leaves registers: the accumulators of n8 fragments 2kk and 2kk+1
 * are exactly the A fragment of k-step kk (a0 = c0c1 of 2kk, a1 = c2c3 of
 * 2kk, a2 = c0c1 of 2kk+1, a3 = c2c3 of 2kk+1), so P is packed to f16/bf16
 * pairs in place (local_edges S -> P: reg).
 *
 * algo_choice.attention:
 *   streaming_softmax_2pass (default): pass 1 streams K computing the row max
 *     m and the row sum l (rescaled as m grows); pass 2 streams K and V again
 *     and accumulates O += (exp(S - m) / l) V.  O is never rescaled.
 *   online_softmax: one pass; O is rescaled by exp(m_old - m_new) per tile
 *     and divided by l at the end.
 * Softmax runs in the log2 domain (ex2.approx): s2 = S * scale * log2(e).
 * Each thread owns rows g and g+8 of its warp's 16; row max/sum are reduced
 * over the quad (lanes 4g..4g+3) with shfl.bfly 1 and 2.
 * Masking: keys >= n and (causal) keys > query are -inf; a causal CTA stops
 * at key q0 + BM; a fully masked row yields zeros, never NaN.
 * A ShapeSet build (spec nsyms > 0, issue 25) reads m, n and the strides
 * as the text Mt, Nt, *_t (formulas of hp_sv<i>, or the constants): the
 * tiles' row limits, the key mask, kend, the batch bases, the store; the
 * grid keeps the box's query tiles and a CTA past the binding's returns. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"

void cuda_attn_spec_init(cuda_attn_spec *s, int64_t b, int64_t h, int64_t m, int64_t n, int64_t d, tiny_dtype dt) {
  memset(s, 0, sizeof *s);
  s->b = b, s->h = h, s->m = m, s->n = n, s->d = d, s->dv = d;
  s->q_dtype = s->kv_dtype = s->o_dtype = s->mask_dtype = dt;
  cuda_tune_default(&s->tune, CUDA_SM80);
}

/* Padded head dimension: a multiple of 16 the swizzle accepts. */
static int pad_dim(int64_t d) {
  static const int ok[] = {16, 32, 64, 128, 192, 256};
  for (int i = 0; i < UT_ARRAY_LEN(ok); i++)
    if (d <= ok[i]) return ok[i];
  return 0;
}

typedef struct attn_gen {
  cuda_b b;
  const cuda_attn_spec *s;
  bool tf32;                          /* fp32 q, k, v: m16n8k8 .tf32, fp32 tiles */
  int esz;                            /* bytes per SMEM element */
  int64_t qs[3], ks[3], vs[3], os[3]; /* element strides over (b, h, row) */
  int BM, BN, D, DV, T, NFS, NFO;
  int64_t q_off, k_off, v_off, k_stage, v_stage; /* SMEM byte offsets */
  float scale2;                                  /* scale * log2(e) */
  const char *Mt, *Nt;                           /* m, n as C text (run-time formulas or constants) */
  const char *st_t[4][3], *mask_t[4];            /* the strides of q, k, v, out and mask as C text */
} attn_gen;

/* Size v as C text: z's formula when it has symbols, else the constant. */
static const char *sz_text(cuda_b *b, const cuda_rtsz *z, int64_t v) {
  const char *t = z->n ? cuda_rtsz_text(b, z) : NULL;
  return t ? t : cuda_fmt(b, "%lld", (long long)v);
}

/* a's sizes and strides as text from its spec (its rt_* formulas). */
static void attn_texts(attn_gen *a) {
  const cuda_attn_spec *s = a->s;
  cuda_b *b = &a->b;
  a->Mt = sz_text(b, &s->rt_m, s->m), a->Nt = sz_text(b, &s->rt_n, s->n);
  const int64_t *st[4] = {a->qs, a->ks, a->vs, a->os};
  for (int o = 0; o < 4; o++)
    for (int i = 0; i < 3; i++) a->st_t[o][i] = sz_text(b, &s->rt_st[o][i], st[o][i]);
  for (int i = 0; i < 4; i++) a->mask_t[i] = sz_text(b, &s->rt_mask[i], s->mask_s[i]);
}

/* Byte offset of element (r, c) of a tile of `cols` columns: rows read by
 * ldmatrix (Q, K; and V in 16 bits, .trans), or per element (fp32 V). */
static const char *tile_off(attn_gen *a, int cols, bool rows_read, const char *r, const char *c) {
  if (a->esz == 2) return cuda_swz_off(&a->b, cols, false, r, c);
  return cuda_swz_off32(&a->b, cols, rows_read, false, r, c);
}

/* cp.async of a rows x cols tile from `g` (row stride `stride`, `valid_cols`
 * real columns) at global row `row0`; rows >= row_lim and columns >= valid_cols
 * are zero-filled. */
static void emit_tile(attn_gen *a, const char *tag, const char *sdst, const char *gbase, const char *row0,
                      const char *row_lim, int rows, int cols, int64_t valid_cols, const char *stride, bool rows_read) {
  cuda_b *b = &a->b;
  int ce = 16 / a->esz, cpr = cols / ce, total = rows * cpr, iters = (total + a->T - 1) / a->T;
  cuda_for(b, cuda_fmt(b, "hk_it%s", tag), "0", cuda_fmt(b, "%d", iters), -1);
  cuda_decl(b, "const int", "hk_q", NULL, cuda_fmt(b, "tid + hk_it%s * %d", tag, a->T));
  if (total % a->T) cuda_if(b, cuda_fmt(b, "hk_q < %d", total));
  cuda_decl(b, "const int", "hk_r", NULL, cuda_fmt(b, "hk_q / %d", cpr));
  cuda_decl(b, "const int", "hk_c", NULL, cuda_fmt(b, "(hk_q %% %d) * %d", cpr, ce));
  cuda_decl(b, "const int", "hk_gr", NULL, cuda_fmt(b, "(%s) + hk_r", row0));
  cuda_decl(b, "const int", "hk_left", NULL, cuda_fmt(b, "%lld - hk_c", (long long)valid_cols));
  cuda_decl(b, "const int", "hk_n", NULL,
            cuda_fmt(b, "(hk_gr < %s && hk_left > 0) ? (hk_left < %d ? hk_left : %d) * %d : 0", row_lim, ce, ce,
                     a->esz));
  cuda_decl(b, cuda_fmt(b, "const %s *", cuda_ctype(a->s->q_dtype)), "hk_src", NULL,
            cuda_fmt(b, "hk_n ? %s + (hk_i64)hk_gr * %s + hk_c : %s", gbase, stride, gbase));
  cuda_stmt *cp = cuda_emit_s(b, CU_CP_ASYNC, cuda_fmt(b, "%s + %s", sdst, tile_off(a, cols, rows_read, "hk_r", "hk_c")),
                              "hk_src", "hk_n", NULL);
  cp->i[0] = 16;
  if (total % a->T) cuda_close(b);
  cuda_close(b);
}

/* Load key block `jb` (C text): K, and V when with_v, into stage jb % 2. */
static void emit_kv_load(attn_gen *a, const char *jb, bool with_v) {
  cuda_b *b = &a->b;
  const cuda_attn_spec *s = a->s;
  const char *st = cuda_fmt(b, "((%s) & 1)", jb);
  const char *row0 = cuda_fmt(b, "(%s) * %d", jb, a->BN);
  emit_tile(a, "k", cuda_fmt(b, "hk_sb + %lld + %s * %lld", (long long)a->k_off, st, (long long)a->k_stage), "Kb", row0,
            a->Nt, a->BN, a->D, s->d, a->st_t[1][2], true);
  if (with_v)
    emit_tile(a, "v", cuda_fmt(b, "hk_sb + %lld + %s * %lld", (long long)a->v_off, st, (long long)a->v_stage), "Vb", row0,
              a->Nt, a->BN, a->DV, s->dv, a->st_t[2][2], !a->tf32);
  cuda_emit(b, CU_COMMIT_GROUP);
}

/* S = Q K^T for key block jb on stage jb % 2 into sacc[NFS][4], then the
 * scaled, masked log2-domain scores in place. */
static void emit_scores(attn_gen *a) {
  cuda_b *b = &a->b;
  const cuda_attn_spec *s = a->s;
  cuda_for(b, "jj", "0", cuda_fmt(b, "%d", a->NFS), -1);
  cuda_assign(b, "sacc[jj][0]", "0.0f");
  cuda_assign(b, "sacc[jj][1]", "0.0f");
  cuda_assign(b, "sacc[jj][2]", "0.0f");
  cuda_assign(b, "sacc[jj][3]", "0.0f");
  cuda_close(b);
  int ks = a->tf32 ? 8 : 16; /* k per mma: 32 bytes of a row either way */
  cuda_for(b, "kk", "0", cuda_fmt(b, "%d", a->D / ks), -1);
  cuda_for(b, "jp", "0", cuda_fmt(b, "%d", a->NFS / 2), -1);
  cuda_stmt *lm = cuda_emit_s(
      b, CU_LDMATRIX, "&kf[2 * jp][0]",
      cuda_fmt(b, "hk_sb + %lld + (jb & 1) * %lld + %s", (long long)a->k_off, (long long)a->k_stage,
               tile_off(a, a->D, true, "jp * 16 + (lane >> 4) * 8 + (lane & 7)",
                        a->tf32 ? "kk * 8 + ((lane >> 3) & 1) * 4" : "kk * 16 + ((lane >> 3) & 1) * 8")),
      NULL, NULL);
  lm->i[0] = 4;
  lm->i[1] = 0;
  cuda_close(b);
  cuda_for(b, "jj", "0", cuda_fmt(b, "%d", a->NFS), -1);
  if (a->tf32) {
    cuda_assign(b, "kf[jj][0]", "hk_tf32(kf[jj][0])");
    cuda_assign(b, "kf[jj][1]", "hk_tf32(kf[jj][1])");
  }
  cuda_stmt *mma = cuda_emit_s(b, CU_MMA_SYNC, "sacc[jj]", "qf[kk]", "kf[jj]", NULL);
  mma->i[0] = 16, mma->i[1] = 8, mma->i[2] = ks;
  mma->dtype = s->q_dtype;
  cuda_close(b);
  cuda_close(b); /* kk */
  /* scale, mask, causal, tails -> log2 domain */
  char sc[48];
  snprintf(sc, sizeof sc, "%#.9gf", (double)a->scale2);
  cuda_for(b, "jj", "0", cuda_fmt(b, "%d", a->NFS), -1);
  cuda_for(b, "e", "0", "4", -1);
  cuda_decl(b, "const int", "hk_qi", NULL, "q0 + warp * 16 + (lane >> 2) + (e >> 1) * 8");
  cuda_decl(b, "const int", "hk_kj", NULL, cuda_fmt(b, "jb * %d + jj * 8 + (lane & 3) * 2 + (e & 1)", a->BN));
  const char *ok = s->causal ? cuda_fmt(b, "hk_kj < %s && hk_kj <= hk_qi", a->Nt) : cuda_fmt(b, "hk_kj < %s", a->Nt);
  const char *val = cuda_fmt(b, "sacc[jj][e] * %s", sc);
  if (s->has_mask)
    val = cuda_fmt(b, "%s + (hk_qi < %s ? %s(Mb + (hk_i64)hk_qi * %s + (hk_i64)hk_kj * %s) * 1.44269504088896341f : 0.0f)", val,
                   a->Mt, cuda_ld_fn(s->mask_dtype), a->mask_t[2], a->mask_t[3]);
  cuda_assign(b, "sacc[jj][e]", cuda_fmt(b, "(%s) ? %s : -HK_INF", ok, val));
  cuda_close(b);
  cuda_close(b);
}

/* Quad-wide max of the two rows a thread owns: new m (in m_use form). */
static void emit_row_max(attn_gen *a) {
  cuda_b *b = &a->b;
  cuda_decl(b, "float", "tmax", "[2]", "{-HK_INF, -HK_INF}");
  cuda_for(b, "jj", "0", cuda_fmt(b, "%d", a->NFS), -1);
  cuda_assign(b, "tmax[0]", "hk_fmax(tmax[0], hk_fmax(sacc[jj][0], sacc[jj][1]))");
  cuda_assign(b, "tmax[1]", "hk_fmax(tmax[1], hk_fmax(sacc[jj][2], sacc[jj][3]))");
  cuda_close(b);
  cuda_for(b, "r", "0", "2", -1);
  cuda_emit_s(b, CU_SHFL_XOR, "tmax[r]", "1", "hk_fmax", NULL);
  cuda_emit_s(b, CU_SHFL_XOR, "tmax[r]", "2", "hk_fmax", NULL);
  cuda_close(b);
}

/* TF32: P's accumulator layout (row g: columns 2t, 2t+1) is not the A
 * layout of m16n8k8 (row g: columns t, t+4): the quad's lanes trade values
 * (shfl.idx from lanes 4g + t/2 and 4g + 2 + t/2); P and V rounded to TF32. */
static void emit_pv_tf32(attn_gen *a) {
  cuda_b *b = &a->b;
  cuda_comment(b, "P (registers, traded across the quad into the m16n8k8 A layout) x V (ld.shared per element)");
  cuda_decl(b, "const int", "hk_s1", NULL, "(lane & ~3) | ((lane & 3) >> 1)");
  cuda_decl(b, "const bool", "hk_odd", NULL, "(lane & 1) != 0");
  cuda_for(b, "kk", "0", cuda_fmt(b, "%d", a->BN / 8), -1);
  cuda_decl(b, "float", "hk_x", "[4]", NULL);
  cuda_decl(b, "float", "hk_y", "[4]", NULL);
  cuda_for(b, "e", "0", "4", -1);
  cuda_assign(b, "hk_x[e]", "hk_shfl_idx(sacc[kk][e], hk_s1)");
  cuda_assign(b, "hk_y[e]", "hk_shfl_idx(sacc[kk][e], hk_s1 + 2)");
  cuda_close(b);
  cuda_decl(b, "hk_u32", "pf", "[4]", NULL);
  cuda_assign(b, "pf[0]", "hk_tf32(hk_f2u(hk_odd ? hk_x[1] : hk_x[0]))");
  cuda_assign(b, "pf[1]", "hk_tf32(hk_f2u(hk_odd ? hk_x[3] : hk_x[2]))");
  cuda_assign(b, "pf[2]", "hk_tf32(hk_f2u(hk_odd ? hk_y[1] : hk_y[0]))");
  cuda_assign(b, "pf[3]", "hk_tf32(hk_f2u(hk_odd ? hk_y[3] : hk_y[2]))");
  cuda_for(b, "jo", "0", cuda_fmt(b, "%d", a->NFO), -1);
  for (int q = 0; q < 2; q++) {
    const char *addr = cuda_fmt(b, "hk_sb + %lld + (jb & 1) * %lld + %s", (long long)a->v_off, (long long)a->v_stage,
                                tile_off(a, a->DV, false, cuda_fmt(b, "kk * 8 + (lane & 3) + %d", 4 * q), "jo * 8 + (lane >> 2)"));
    cuda_emit_s(b, CU_LD_SHARED, cuda_fmt(b, "vf[jo][%d]", q), addr, NULL, NULL)->i[0] = 4;
    cuda_assign(b, cuda_fmt(b, "vf[jo][%d]", q), cuda_fmt(b, "hk_tf32(vf[jo][%d])", q));
  }
  cuda_stmt *mma = cuda_emit_s(b, CU_MMA_SYNC, "o[0][jo]", "pf", "vf[jo]", NULL);
  mma->i[0] = 16, mma->i[1] = 8, mma->i[2] = 8;
  mma->dtype = TINY_FP32;
  cuda_close(b);
  cuda_close(b);
}

static void emit_pv(attn_gen *a) {
  cuda_b *b = &a->b;
  const cuda_attn_spec *s = a->s;
  if (a->tf32) {
    emit_pv_tf32(a);
    return;
  }
  const char *pack = s->kv_dtype == TINY_BF16 ? "hk_pack_bf2" : "hk_pack_h2";
  cuda_comment(b, "P (registers, the accumulator layout = the A fragment layout) x V");
  cuda_for(b, "kk", "0", cuda_fmt(b, "%d", a->BN / 16), -1);
  cuda_decl(b, "hk_u32", "pf", "[4]", NULL);
  cuda_assign(b, "pf[0]", cuda_fmt(b, "%s(sacc[2 * kk][0], sacc[2 * kk][1])", pack));
  cuda_assign(b, "pf[1]", cuda_fmt(b, "%s(sacc[2 * kk][2], sacc[2 * kk][3])", pack));
  cuda_assign(b, "pf[2]", cuda_fmt(b, "%s(sacc[2 * kk + 1][0], sacc[2 * kk + 1][1])", pack));
  cuda_assign(b, "pf[3]", cuda_fmt(b, "%s(sacc[2 * kk + 1][2], sacc[2 * kk + 1][3])", pack));
  cuda_for(b, "jp", "0", cuda_fmt(b, "%d", a->NFO / 2), -1);
  cuda_stmt *lm = cuda_emit_s(
      b, CU_LDMATRIX, "&vf[2 * jp][0]",
      cuda_fmt(b, "hk_sb + %lld + (jb & 1) * %lld + %s", (long long)a->v_off, (long long)a->v_stage,
               cuda_swz_off(b, a->DV, false, "kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)", "jp * 16 + (lane >> 4) * 8")),
      NULL, NULL);
  lm->i[0] = 4;
  lm->i[1] = 1;
  cuda_close(b);
  cuda_for(b, "jo", "0", cuda_fmt(b, "%d", a->NFO), -1);
  cuda_stmt *mma = cuda_emit_s(b, CU_MMA_SYNC, "o[0][jo]", "pf", "vf[jo]", NULL);
  mma->i[0] = 16, mma->i[1] = 8, mma->i[2] = 16;
  mma->dtype = s->kv_dtype;
  cuda_close(b);
  cuda_close(b);
}

/* for (jb...) { wait; barrier; prefetch jb+1; body } over the key blocks. */
static void open_kv_loop(attn_gen *a, bool with_v) {
  cuda_b *b = &a->b;
  cuda_for(b, "jb", "0", "nblk", 1);
  cuda_stmt *w = cuda_emit(b, CU_WAIT_GROUP);
  w->i[0] = 0;
  cuda_emit(b, CU_BARRIER);
  cuda_if(b, "jb + 1 < nblk");
  emit_kv_load(a, "jb + 1", with_v);
  cuda_close(b);
}

/* Checks spec s against module m (arch, sizes, dtypes, head dims, limits);
 * fails with name on what the template cannot take. */
static harp_status attn_check_spec(harp_error *e, const cuda_module *m, const cuda_attn_spec *s, const char *name) {
  if (!cuda_arch_runs_on(s->tune.arch, m->arch))
    return ut_fail(e, HARP_E_INVALID_ARG, name, "plan arch %s in a %s module", cuda_arch_name(s->tune.arch),
                   cuda_arch_name(m->arch));
  if (s->b < 1 || s->h < 1 || s->m < 1 || s->n < 1 || s->d < 1 || s->dv < 1)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "attention sizes must be >= 1");
  if ((s->q_dtype != TINY_FP16 && s->q_dtype != TINY_BF16 && s->q_dtype != TINY_FP32) || s->kv_dtype != s->q_dtype)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "attention takes fp16, bf16 or fp32 q, k, v of one dtype");
  if (s->q_dtype == TINY_FP32 && s->math != CUDA_MATH_TF32)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "fp32 attention computes as TF32 only (math %s: two matmuls and a softmax)",
                   cuda_math_name(s->math));
  if (s->o_dtype != TINY_FP16 && s->o_dtype != TINY_BF16 && s->o_dtype != TINY_FP32)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "attention output dtype %s", tiny_dtype_name(s->o_dtype));
  if (s->has_mask && s->mask_dtype != TINY_FP16 && s->mask_dtype != TINY_BF16 && s->mask_dtype != TINY_FP32)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "mask dtype %s", tiny_dtype_name(s->mask_dtype));
  if (s->d % 8 || s->dv % 8 || !pad_dim(s->d) || !pad_dim(s->dv))
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "head dims %lld / %lld: multiples of 8 up to 256", (long long)s->d,
                   (long long)s->dv);
  if (s->m > INT32_MAX / 2 || s->n > INT32_MAX / 2) return ut_fail(e, HARP_E_LIMIT, name, "sequence too long");
  if (s->b * s->h > 65535) return ut_fail(e, HARP_E_LIMIT, name, "b*h = %lld > 65535", (long long)(s->b * s->h));
  return HARP_OK;
}

/* a's element strides of q, k, v and out: s's own (checked non-negative and
 * aligned for cp.async) when strided, else the packed (b, h, row) ones. */
static harp_status attn_strides(harp_error *e, const cuda_attn_spec *s, const char *name, attn_gen *a) {
  int al = 16 / a->esz; /* elements per 16-byte cp.async chunk */
  if (s->strided) {
    memcpy(a->qs, s->q_s, sizeof a->qs), memcpy(a->ks, s->k_s, sizeof a->ks);
    memcpy(a->vs, s->v_s, sizeof a->vs), memcpy(a->os, s->o_s, sizeof a->os);
    for (int i = 0; i < 3; i++) {
      if (a->qs[i] < 0 || a->ks[i] < 0 || a->vs[i] < 0 || a->os[i] < 0)
        return ut_fail(e, HARP_E_NEGATIVE_STRIDE, name, "negative attention stride");
      /* rows go through 16-byte cp.async, the output through element pairs */
      if (a->qs[i] % al || a->ks[i] % al || a->vs[i] % al || a->os[i] % 2)
        return ut_fail(e, HARP_E_UNSUPPORTED, name, "q/k/v strides must be multiples of %d elements, out's of 2", al);
    }
  } else {
    int64_t q[3] = {s->h * s->m * s->d, s->m * s->d, s->d}, k[3] = {s->h * s->n * s->d, s->n * s->d, s->d};
    int64_t v[3] = {s->h * s->n * s->dv, s->n * s->dv, s->dv}, o[3] = {s->h * s->m * s->dv, s->m * s->dv, s->dv};
    memcpy(a->qs, q, sizeof q), memcpy(a->ks, k, sizeof k), memcpy(a->vs, v, sizeof v), memcpy(a->os, o, sizeof o);
  }
  return HARP_OK;
}

/* a's tiles, fragment counts, SMEM layout and scale from s; *smem gets the
 * bytes per CTA (checked against m's arch), name locates the failures. */
static harp_status attn_sizes(harp_error *e, const cuda_module *m, const cuda_attn_spec *s, const char *name, attn_gen *a,
                              int64_t *smem) {
  a->BM = s->bm ? s->bm : 64;
  a->BN = s->bn ? s->bn : 64;
  if (a->BM != 64) return ut_fail(e, HARP_E_UNSUPPORTED, name, "attention query tile must be 64 (4 warps x 16 rows)");
  if (a->BN % 16 || a->BN < 16 || a->BN > 128)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "key tile %d: 16..128, multiple of 16", a->BN);
  a->D = pad_dim(s->d), a->DV = pad_dim(s->dv);
  a->T = 128;
  a->NFS = a->BN / 8, a->NFO = a->DV / 8;
  int regs = a->D / (a->tf32 ? 8 : 16) * 4 + a->NFS * 4 + a->NFO * 4 + a->NFS * 2 + 48;
  if (regs > 255)
    return ut_fail(e, HARP_E_REG_OVERFLOW, name, "head dims %d/%d with %d keys per tile need about %d registers", a->D, a->DV,
                   a->BN, regs);
  a->q_off = 0;
  a->k_off = (int64_t)a->BM * a->D * a->esz;
  a->k_stage = (int64_t)a->BN * a->D * a->esz;
  a->v_off = a->k_off + 2 * a->k_stage;
  a->v_stage = a->tf32 ? (int64_t)a->BN * cuda_pitch32(a->DV, false, false) : (int64_t)a->BN * a->DV * a->esz;
  *smem = a->v_off + 2 * a->v_stage;
  if (*smem > cuda_smem_max(m->arch))
    return ut_fail(e, HARP_E_SMEM_OVERFLOW, name, "attention needs %lld bytes of shared memory", (long long)*smem);
  float scale = s->scale != 0 ? s->scale : 1.0f / sqrtf((float)s->d);
  a->scale2 = scale * 1.44269504088896341f;
  return HARP_OK;
}

/* Kernel k's pointer parameters (q, k, v, mask, out of a's spec) and its
 * metadata. */
static void attn_params_meta(attn_gen *a, cuda_kernel *k) {
  const cuda_attn_spec *s = a->s;
  cuda_b *b = &a->b;
  const char *et = cuda_ctype(s->q_dtype);
  cuda_param_add(k, "q", et, CUDA_P_PTR_IN, s->q_dtype);
  cuda_param_align(k, 16);
  cuda_param_add(k, "k", et, CUDA_P_PTR_IN, s->kv_dtype);
  cuda_param_align(k, 16);
  cuda_param_add(k, "v", et, CUDA_P_PTR_IN, s->kv_dtype);
  cuda_param_align(k, 16);
  cuda_param_add(k, "mask", cuda_ctype(s->mask_dtype), CUDA_P_PTR_IN, s->mask_dtype);
  cuda_param_add(k, "out", cuda_ctype(s->o_dtype), CUDA_P_PTR_OUT, s->o_dtype);
  cuda_param_align(k, 2 * tiny_dtype_size(s->o_dtype));
  cuda_meta_str(k, "template", "sm80_mma");
  cuda_meta_str(k, "algo_choice.attention", s->online ? "online_softmax" : "streaming_softmax_2pass");
  cuda_meta_int(k, "BM", a->BM);
  cuda_meta_int(k, "BN", a->BN);
  cuda_meta_int(k, "D", a->D);
  cuda_meta_int(k, "DV", a->DV);
  cuda_meta_int(k, "stages", 2);
  cuda_meta_str(k, "warp_tile", cuda_fmt(b, "16x%d", a->DV));
  cuda_meta_str(k, "local_edges", "S->P: reg, O: reg");
  cuda_meta_int(k, "causal", s->causal);
  if (a->tf32) cuda_meta_str(k, "math", "mma.sync m16n8k8 .tf32 (q, k, P, v rounded to TF32)");
}

/* The kernel's declarations: thread indices, the (b, h) base pointers of
 * q, k, v, out (and mask) through a's strides, the key-block count (causal
 * or not) and the register fragments and row statistics. */
static void attn_decls(attn_gen *a) {
  const cuda_attn_spec *s = a->s;
  cuda_b *b = &a->b;
  const char *et = cuda_ctype(s->q_dtype);
  cuda_call(b, "HK_SMEM_DECL(hk_smem)");
  cuda_decl(b, "const hk_saddr", "hk_sb", NULL, "hk_smem_addr(hk_smem)");
  cuda_decl(b, "const int", "tid", NULL, "threadIdx.x");
  cuda_decl(b, "const int", "lane", NULL, "tid & 31");
  cuda_decl(b, "const int", "warp", NULL, "tid >> 5");
  cuda_decl(b, "const int", "q0", NULL, cuda_fmt(b, "blockIdx.x * %d", a->BM));
  if (s->nsyms) cuda_call(b, cuda_fmt(b, "if (q0 >= %s) return", a->Mt)); /* past the binding's m: the whole CTA */
  /* the heads H: a literal, or the binding's (rt_h) */
  const char *H = s->nsyms && s->rt_h.n ? cuda_fmt(b, "(%s)", cuda_rtsz_text(b, &s->rt_h)) : cuda_fmt(b, "%lld", (long long)s->h);
  if (s->nsyms && (s->rt_b.n || s->rt_h.n)) /* past the binding's batches x heads (grid.y: the box's b x h) */
    cuda_call(b, cuda_fmt(b, "if ((hk_i64)blockIdx.y >= %s * %s%s) return",
                          s->rt_b.n ? cuda_rtsz_text(b, &s->rt_b) : cuda_fmt(b, "%lldL", (long long)s->b), H, s->rt_h.n ? "" : "L"));
  cuda_decl(b, "const int", "bh", NULL, "blockIdx.y");
  /* (b, h) = (bh / H, bh % H) through the strides */
  const char *bb = cuda_fmt(b, "(hk_i64)(bh / %s)", H), *hh = cuda_fmt(b, "(hk_i64)(bh %% %s)", H);
  const char *pn[4] = {"Qb", "Kb", "Vb", "Ob"}, *gn[4] = {"q", "k", "v", "out"};
  for (int o = 0; o < 4; o++)
    cuda_decl(b, o == 3 ? cuda_fmt(b, "%s *", cuda_ctype(s->o_dtype)) : cuda_fmt(b, "const %s *", et), pn[o], NULL,
              cuda_fmt(b, "%s + %s * %s + %s * %s", gn[o], bb, a->st_t[o][0], hh, a->st_t[o][1]));
  if (s->has_mask)
    cuda_decl(b, cuda_fmt(b, "const %s *", cuda_ctype(s->mask_dtype)), "Mb", NULL,
              cuda_fmt(b, "mask + %s * %s + %s * %s", bb, a->mask_t[0], hh, a->mask_t[1]));
  if (s->causal) cuda_decl(b, "const int", "kend", NULL, cuda_fmt(b, "q0 + %d < %s ? q0 + %d : %s", a->BM, a->Nt, a->BM, a->Nt));
  else cuda_decl(b, "const int", "kend", NULL, a->Nt);
  cuda_decl(b, "const int", "nblk", NULL, cuda_fmt(b, "(kend + %d) / %d", a->BN - 1, a->BN));
  cuda_decl(b, "hk_u32", "qf", cuda_fmt(b, "[%d][4]", a->D / (a->tf32 ? 8 : 16)), NULL);
  cuda_decl(b, "hk_u32", "kf", cuda_fmt(b, "[%d][2]", a->NFS), NULL);
  cuda_decl(b, "hk_u32", "vf", cuda_fmt(b, "[%d][2]", a->NFO), NULL);
  cuda_decl(b, "float", "sacc", cuda_fmt(b, "[%d][4]", a->NFS), NULL);
  cuda_decl(b, "float", "o", cuda_fmt(b, "[1][%d][4]", a->NFO), "{}");
  cuda_decl(b, "float", "mrow", "[2]", "{-HK_INF, -HK_INF}");
  cuda_decl(b, "float", "lrow", "[2]", "{0.0f, 0.0f}");
}

/* The Q tile (once) and the first key block (with V when online), then the
 * Q fragments into registers (rounded to TF32 for fp32). */
static void attn_load_q(attn_gen *a) {
  const cuda_attn_spec *s = a->s;
  cuda_b *b = &a->b;
  cuda_comment(b, "Q tile (once) and the first key block");
  emit_tile(a, "q", cuda_fmt(b, "hk_sb + %lld", (long long)a->q_off), "Qb", "q0", a->Mt, a->BM, a->D, s->d, a->st_t[0][2], true);
  emit_kv_load(a, "0", s->online);
  cuda_emit(b, CU_WAIT_GROUP)->i[0] = 0;
  cuda_emit(b, CU_BARRIER);
  cuda_for(b, "kk", "0", cuda_fmt(b, "%d", a->D / (a->tf32 ? 8 : 16)), -1);
  cuda_stmt *lm = cuda_emit_s(b, CU_LDMATRIX, "qf[kk]",
                              cuda_fmt(b, "hk_sb + %lld + %s", (long long)a->q_off,
                                       tile_off(a, a->D, true, "warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8",
                                                a->tf32 ? "kk * 8 + (lane >> 4) * 4" : "kk * 16 + (lane >> 4) * 8")),
                              NULL, NULL);
  lm->i[0] = 4;
  if (a->tf32) {
    cuda_for(b, "e", "0", "4", -1);
    cuda_assign(b, "qf[kk][e]", "hk_tf32(qf[kk][e])");
    cuda_close(b);
  }
  cuda_close(b);
}

/* Opens the loop over a thread's two rows r and declares the row's new max
 * mnew (the running max mrow against this tile's tmax) and muse, the max
 * to subtract (0 while the row has seen only -inf). */
static void open_row_max_loop(cuda_b *b) {
  cuda_for(b, "r", "0", "2", -1);
  cuda_decl(b, "const float", "mnew", NULL, "hk_fmax(mrow[r], tmax[r])");
  cuda_decl(b, "const float", "muse", NULL, "mnew == -HK_INF ? 0.0f : mnew");
}

/* The streaming two-pass softmax of a: pass 1 streams K for the row max
 * and sum, pass 2 streams K and V again and accumulates (exp(S - m) / l) V. */
static void attn_two_pass(attn_gen *a) {
  cuda_b *b = &a->b;
  /* ---- pass 1: row max and sum ---- */
  cuda_comment(b, "pass 1: stream K, keep the row max m and the row sum l (per-thread partial sums)");
  open_kv_loop(a, false);
  emit_scores(a);
  emit_row_max(a);
  open_row_max_loop(b);
  cuda_assign(b, "lrow[r]", "lrow[r] * hk_exp2(mrow[r] - muse)");
  cuda_for(b, "jj", "0", cuda_fmt(b, "%d", a->NFS), -1);
  cuda_assign(b, "lrow[r]", "lrow[r] + hk_exp2(sacc[jj][2 * r] - muse) + hk_exp2(sacc[jj][2 * r + 1] - muse)");
  cuda_close(b);
  cuda_assign(b, "mrow[r]", "mnew");
  cuda_close(b);
  cuda_close(b); /* jb */
  cuda_comment(b, "l: sum the quad's partial sums; 1/l for pass 2");
  cuda_for(b, "r", "0", "2", -1);
  cuda_emit_s(b, CU_SHFL_XOR, "lrow[r]", "1", "hk_fadd", NULL);
  cuda_emit_s(b, CU_SHFL_XOR, "lrow[r]", "2", "hk_fadd", NULL);
  cuda_assign(b, "lrow[r]", "lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f");
  cuda_assign(b, "mrow[r]", "mrow[r] == -HK_INF ? 0.0f : mrow[r]");
  cuda_close(b);
  /* ---- pass 2 ---- */
  cuda_comment(b, "pass 2: stream K and V again, O += (exp(S - m) / l) V");
  cuda_emit(b, CU_BARRIER);
  emit_kv_load(a, "0", true);
  open_kv_loop(a, true);
  emit_scores(a);
  cuda_for(b, "jj", "0", cuda_fmt(b, "%d", a->NFS), -1);
  cuda_for(b, "e", "0", "4", -1);
  cuda_assign(b, "sacc[jj][e]", "hk_exp2(sacc[jj][e] - mrow[e >> 1]) * lrow[e >> 1]");
  cuda_close(b);
  cuda_close(b);
  emit_pv(a);
  cuda_close(b); /* jb */
}

/* The online softmax of a: one pass over K and V, O and l rescaled when
 * the row max grows, O divided by l at the end. */
static void attn_online(attn_gen *a) {
  cuda_b *b = &a->b;
  cuda_comment(b, "online softmax: one pass, O rescaled when the row max grows");
  open_kv_loop(a, true);
  emit_scores(a);
  emit_row_max(a);
  open_row_max_loop(b);
  cuda_decl(b, "const float", "alpha", NULL, "hk_exp2(mrow[r] - muse)");
  cuda_assign(b, "lrow[r]", "lrow[r] * alpha");
  cuda_for(b, "jo", "0", cuda_fmt(b, "%d", a->NFO), -1);
  cuda_assign(b, "o[0][jo][2 * r]", "o[0][jo][2 * r] * alpha");
  cuda_assign(b, "o[0][jo][2 * r + 1]", "o[0][jo][2 * r + 1] * alpha");
  cuda_close(b);
  cuda_for(b, "jj", "0", cuda_fmt(b, "%d", a->NFS), -1);
  cuda_assign(b, "sacc[jj][2 * r]", "hk_exp2(sacc[jj][2 * r] - muse)");
  cuda_assign(b, "sacc[jj][2 * r + 1]", "hk_exp2(sacc[jj][2 * r + 1] - muse)");
  cuda_assign(b, "lrow[r]", "lrow[r] + sacc[jj][2 * r] + sacc[jj][2 * r + 1]");
  cuda_close(b);
  cuda_assign(b, "mrow[r]", "mnew");
  cuda_close(b);
  emit_pv(a);
  cuda_close(b); /* jb */
  cuda_for(b, "r", "0", "2", -1);
  cuda_emit_s(b, CU_SHFL_XOR, "lrow[r]", "1", "hk_fadd", NULL);
  cuda_emit_s(b, CU_SHFL_XOR, "lrow[r]", "2", "hk_fadd", NULL);
  cuda_decl(b, "const float", "inv", NULL, "lrow[r] > 0.0f ? 1.0f / lrow[r] : 0.0f");
  cuda_for(b, "jo", "0", cuda_fmt(b, "%d", a->NFO), -1);
  cuda_assign(b, "o[0][jo][2 * r]", "o[0][jo][2 * r] * inv");
  cuda_assign(b, "o[0][jo][2 * r + 1]", "o[0][jo][2 * r + 1] * inv");
  cuda_close(b);
  cuda_close(b);
}

/* The epilogue: the Epilogue statement on a's O fragments, then O stored
 * to out as element pairs of o_dtype, clipped to m x dv. */
static void attn_store(attn_gen *a) {
  const cuda_attn_spec *s = a->s;
  cuda_b *b = &a->b;
  cuda_stmt *ep = cuda_emit_s(b, CU_EPILOGUE, "o", "q0 + warp * 16", "0", a->Mt);
  ep->s[4] = cuda_fmt(b, "%lld", (long long)s->dv);
  ep->i[0] = 1;
  ep->i[1] = a->NFO;
  ep->dtype = s->o_dtype;
  int osz = tiny_dtype_size(s->o_dtype);
  cuda_for(b, "jo", "0", cuda_fmt(b, "%d", a->NFO), -1);
  cuda_for(b, "h", "0", "2", -1);
  cuda_decl(b, "const int", "hk_r", NULL, "q0 + warp * 16 + (lane >> 2) + h * 8");
  cuda_decl(b, "const int", "hk_c", NULL, "jo * 8 + (lane & 3) * 2");
  const char *val = osz == 4 ? "hk_v2{hk_f2u(o[0][jo][2 * h]), hk_f2u(o[0][jo][2 * h + 1])}"
                             : cuda_fmt(b, "%s(o[0][jo][2 * h], o[0][jo][2 * h + 1])",
                                        s->o_dtype == TINY_BF16 ? "hk_pack_bf2" : "hk_pack_h2");
  cuda_stmt *sg = cuda_emit_s(b, CU_ST_GLOBAL_VEC, cuda_fmt(b, "Ob + (hk_i64)hk_r * %s + hk_c", a->st_t[3][2]), val,
                              cuda_fmt(b, "hk_r < %s && hk_c < %lld", a->Mt, (long long)s->dv), NULL);
  sg->i[0] = 2 * osz;
  cuda_close(b);
  cuda_close(b);
}

harp_status cuda_gen_attn(harp_error *e, cuda_module *m, const cuda_attn_spec *s, const char *name) {
  harp_status st = attn_check_spec(e, m, s, name);
  if (st != HARP_OK) return st;
  attn_gen a;
  memset(&a, 0, sizeof a);
  a.s = s;
  a.tf32 = s->q_dtype == TINY_FP32;
  a.esz = a.tf32 ? 4 : 2;
  int64_t smem = 0;
  if ((st = attn_strides(e, s, name, &a)) != HARP_OK || (st = attn_sizes(e, m, s, name, &a, &smem)) != HARP_OK) return st;
  cuda_b *b = &a.b;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "attention");
  if (!k) return e->code;
  k->grid[0] = (s->m + a.BM - 1) / a.BM;
  k->grid[1] = s->b * s->h;
  k->block[0] = a.T;
  k->smem_bytes = smem;
  attn_params_meta(&a, k);
  for (int i = 0; i < s->nsyms; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
  attn_texts(&a);
  attn_decls(&a);
  attn_load_q(&a);
  if (!s->online) attn_two_pass(&a);
  else attn_online(&a);
  cuda_emit(b, CU_WAIT_GROUP)->i[0] = 0;
  attn_store(&a);
  return cuda_b_finish(b, k);
}
