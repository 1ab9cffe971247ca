/* cuda_simple.c — the non-contraction kernels: elementwise chains, single
 * axis reductions, row softmax, row layernorm (Welford).
 * Needs: cuda.h, cuda_int.h (cuda_rtsz_text).  Gives: cuda_gen_ewise, cuda_gen_reduce, cuda_gen_softmax,
 * cuda_gen_layernorm, cuda_gen_zero, cuda_gen_zero_at, cuda_gen_pack_tf32.
 *
 * All are coalesced (consecutive lanes touch consecutive elements) and
 * vectorised where the layout allows it (16-byte ld/st.global.v4 on
 * contiguous, aligned data; scalar tails).  Row kernels give one warp per row
 * and reduce with shfl.bfly; compute is fp32 throughout, fp16/bf16 rounded on
 * CAST and on the store (the reference interpreter's rules). */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_int.h"
#include "tiny/tiny_spell.h"

static void flit(char *buf, size_t cap, double v) {
  float f = (float)v;
  if (f != f) snprintf(buf, cap, "hk_u2f(0x7fc00000u)");
  else if (f > 3.4e38f) snprintf(buf, cap, "HK_INF");
  else if (f < -3.4e38f) snprintf(buf, cap, "(-HK_INF)");
  else {
    char t[48];
    snprintf(t, sizeof t, "%.9g", (double)f);
    snprintf(buf, cap, "%s%sf", t, strpbrk(t, ".e") ? "" : ".0");
  }
}

static int threads_of(const cuda_tune *t) { return t->threads ? t->threads : 256; }

static harp_status check_threads(harp_error *e, const char *name, int T) {
  if (T < 32 || T > 1024 || T % 32) return ut_fail(e, HARP_E_INVALID_ARG, name, "threads per CTA %d: a multiple of 32 up to 1024", T);
  return HARP_OK;
}

static bool storage_ok(tiny_dtype t) {
  return t == TINY_FP16 || t == TINY_BF16 || t == TINY_FP32 || t == TINY_I32 || t == TINY_BOOL;
}

/* Element `e` (C text) of a register array `w` of 32-bit words holding
 * packed elements of dtype t, as float. */
static const char *unpack(cuda_b *b, tiny_dtype t, const char *w, const char *e) {
  switch (t) {
  case TINY_FP16: return cuda_fmt(b, "hk_h2f((hk_u16)(%s[(%s) >> 1] >> (((%s) & 1) * 16)))", w, e, e);
  case TINY_BF16: return cuda_fmt(b, "hk_bf2f((hk_u16)(%s[(%s) >> 1] >> (((%s) & 1) * 16)))", w, e, e);
  case TINY_FP32: return cuda_fmt(b, "hk_u2f(%s[%s])", w, e);
  case TINY_I32: return cuda_fmt(b, "(float)(int)%s[%s]", w, e);
  default: return cuda_fmt(b, "(float)((%s[(%s) >> 2] >> (((%s) & 3) * 8)) & 0xff)", w, e, e);
  }
}

/* ---- elementwise ------------------------------------------------------------------ */
/* The value of instruction `in` on operand values v: a constant, a CAST
 * (rounded through its dtype), or the op table's CUDA text. */
static const char *ew_expr(cuda_b *b, const cuda_ew_instr *in, const char *const *v) {
  char f[64];
  if (in->op == TINY_CONST) {
    flit(f, sizeof f, in->imm);
    return cuda_fmt(b, "%s", f);
  }
  if (in->op == TINY_CAST) {
    switch (in->dtype) {
    case TINY_FP16: return cuda_fmt(b, "hk_h2f(hk_f2h(%s))", v[0]);
    case TINY_BF16: return cuda_fmt(b, "hk_bf2f(hk_f2bf(%s))", v[0]);
    case TINY_I32: return cuda_fmt(b, "(float)hk_f2i(%s)", v[0]);
    case TINY_BOOL: return cuda_fmt(b, "(%s != 0.0f ? 1.0f : 0.0f)", v[0]);
    default: return cuda_fmt(b, "%s", v[0]);
    }
  }
  if (!tiny_op_is_elementwise(in->op)) return NULL;
  ut_str t;
  ut_str_init(&t);
  tiny_op_spell(&t, tiny_op_cuda(in->op), v, tiny_op_arity(in->op));
  const char *r = t.oom ? NULL : cuda_fmt(b, "%s", t.buf ? t.buf : "");
  ut_str_free(&t);
  return r;
}

static bool ew_contig(const cuda_ew_spec *s, const cuda_ew_input *in) {
  int64_t st = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    if (s->shape[d] != 1 && in->strides[d] != st) return false;
    st *= s->shape[d];
  }
  return true;
}

/* Checks instruction i of s: a known elementwise op whose operands are
 * earlier values and whose input exists; name locates the failure. */
static harp_status ew_check_instr(harp_error *e, const cuda_ew_spec *s, int i, const char *name) {
  const cuda_ew_instr *in = &s->instr[i];
  if ((unsigned)in->op >= TINY_OP_COUNT) return ut_fail(e, HARP_E_UNKNOWN_OP, name, "instruction %d: bad op", i);
  tiny_class c = tiny_op_class(in->op);
  int ar = in->op == TINY_INPUT || in->op == TINY_CONST ? 0 : c == TC_CAST ? 1 : tiny_op_arity(in->op);
  bool ok = in->op == TINY_INPUT || in->op == TINY_CONST || c == TC_UNARY || c == TC_BINARY || c == TC_TERNARY || c == TC_CAST;
  if (!ok) return ut_fail(e, HARP_E_UNSUPPORTED, name, "instruction %d: %s is not elementwise", i, tiny_op_name(in->op));
  int ops[3] = {in->a, in->b, in->c};
  for (int k = 0; k < ar; k++)
    if (ops[k] < 0 || ops[k] >= i) return ut_fail(e, HARP_E_DANGLING, name, "instruction %d: operand %d is not an earlier value", i, k);
  if (in->op == TINY_INPUT && (in->input < 0 || in->input >= s->ninputs))
    return ut_fail(e, HARP_E_DANGLING, name, "instruction %d: no input %d", i, in->input);
  return HARP_OK;
}

/* Checks spec s (rank, counts, dtypes, shape, strides, instructions);
 * *numel gets its element count. */
static harp_status ew_check_spec(harp_error *e, const cuda_ew_spec *s, const char *name, int64_t *numel) {
  if (s->rank < 0 || s->rank > CUDA_MAX_RANK) return ut_fail(e, HARP_E_LIMIT, name, "rank %d (at most %d)", s->rank, CUDA_MAX_RANK);
  if (s->ninputs < 0 || s->ninputs > CUDA_MAX_EW_IN) return ut_fail(e, HARP_E_LIMIT, name, "%d inputs", s->ninputs);
  if (s->ninstr < 1 || s->ninstr > CUDA_MAX_EW_INSTR) return ut_fail(e, HARP_E_LIMIT, name, "%d instructions", s->ninstr);
  if (!storage_ok(s->out_dtype)) return ut_fail(e, HARP_E_INVALID_ARG, name, "bad output dtype");
  *numel = 1;
  for (int d = 0; d < s->rank; d++) {
    if (s->shape[d] < 1) return ut_fail(e, HARP_E_INVALID_ARG, name, "axis %d has size %lld", d, (long long)s->shape[d]);
    if (!ut_mul_ok(*numel, s->shape[d], numel) || *numel > ((int64_t)1 << 40))
      return ut_fail(e, HARP_E_LIMIT, name, "too many elements");
  }
  for (int i = 0; i < s->ninputs; i++) {
    if (!storage_ok(s->in[i].dtype)) return ut_fail(e, HARP_E_INVALID_ARG, name, "input %d: bad dtype", i);
    for (int d = 0; d < s->rank; d++)
      if (s->in[i].strides[d] < 0) return ut_fail(e, HARP_E_NEGATIVE_STRIDE, name, "input %d: negative stride", i);
  }
  for (int i = 0; i < s->ninstr; i++)
    if (ew_check_instr(e, s, i, name)) return e->code;
  return HARP_OK;
}

/* The 16-byte loads of the V-element chunk of every input i of s with
 * vin[i] (contiguous and aligned) into words hk_w<i>, when the chunk is
 * full. */
static void ew_load_vectors(cuda_b *b, const cuda_ew_spec *s, int V, const bool *vin) {
  for (int i = 0; i < s->ninputs; i++) {
    if (!vin[i]) continue;
    int words = V * tiny_dtype_size(s->in[i].dtype) / 4;
    cuda_decl(b, "hk_u32", cuda_fmt(b, "hk_w%d", i), cuda_fmt(b, "[%d]", words), NULL);
    cuda_if(b, "hk_full");
    cuda_for(b, "hk_q", "0", cuda_fmt(b, "%d", words / 4), -1);
    cuda_decl(b, "hk_v4", "hk_t", NULL, NULL);
    cuda_stmt *ld = cuda_emit_s(b, CU_LD_GLOBAL, "hk_t",
                                cuda_fmt(b, "in%d + hk_base + hk_q * %d", i, 16 / tiny_dtype_size(s->in[i].dtype)), NULL, NULL);
    ld->i[0] = 16;
    cuda_assign(b, cuda_fmt(b, "hk_w%d[hk_q * 4 + 0]", i), "hk_t.x");
    cuda_assign(b, cuda_fmt(b, "hk_w%d[hk_q * 4 + 1]", i), "hk_t.y");
    cuda_assign(b, cuda_fmt(b, "hk_w%d[hk_q * 4 + 2]", i), "hk_t.z");
    cuda_assign(b, cuda_fmt(b, "hk_w%d[hk_q * 4 + 3]", i), "hk_t.w");
    cuda_close(b);
    cuda_close(b);
  }
}

/* The value of input j of s at element hk_idx: from the loaded words when
 * vin[j] and the chunk is full, else a scalar load through the strides
 * (broadcast axes drop out). */
static const char *ew_input_expr(cuda_b *b, const cuda_ew_spec *s, int j, const bool *vin) {
  const cuda_ew_input *ip = &s->in[j];
  const char *off = "0";
  int64_t inner = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    if (ip->strides[d] && s->shape[d] > 1)
      off = cuda_fmt(b, "%s + ((hk_idx / %lld) %% %lld) * %lld", off, (long long)inner, (long long)s->shape[d],
                     (long long)ip->strides[d]);
    inner *= s->shape[d];
  }
  const char *scalar = cuda_fmt(b, "(hk_ok ? %s(in%d + (%s)) : 0.0f)", cuda_ld_fn(ip->dtype), j, off);
  return vin[j] ? cuda_fmt(b, "(hk_full ? %s : %s)", unpack(b, ip->dtype, cuda_fmt(b, "hk_w%d", j), "hk_e"), scalar) : scalar;
}

/* One const float hk_x<i> per instruction of s; *res gets the last one's
 * name.  Fails (name) on an op without a CUDA spelling. */
static harp_status ew_values(harp_error *e, cuda_b *b, const cuda_ew_spec *s, const bool *vin, const char *name, const char **res) {
  const char *vals[CUDA_MAX_EW_INSTR];
  for (int i = 0; i < s->ninstr; i++) {
    const cuda_ew_instr *in = &s->instr[i];
    const char *expr;
    if (in->op == TINY_INPUT) expr = ew_input_expr(b, s, in->input, vin);
    else {
      const char *ops[3] = {in->a >= 0 && in->a < i ? vals[in->a] : "0", in->b >= 0 && in->b < i ? vals[in->b] : "0",
                            in->c >= 0 && in->c < i ? vals[in->c] : "0"};
      expr = ew_expr(b, in, ops);
      if (!expr) return ut_fail(e, HARP_E_UNSUPPORTED, name, "op %s", tiny_op_name(in->op));
    }
    vals[i] = cuda_fmt(b, "hk_x%d", i);
    cuda_decl(b, "const float", vals[i], NULL, expr);
  }
  *res = vals[s->ninstr - 1];
  return HARP_OK;
}

/* Element hk_e's result res of s's out_dtype (osz bytes): packed into the
 * output words hk_o when vec_out, and stored on its own where the chunk is
 * not full (always, when not vec_out). */
static void ew_store_element(cuda_b *b, const cuda_ew_spec *s, const char *res, int osz, bool vec_out) {
  if (vec_out) {
    if (osz == 2)
      cuda_assign(b, "hk_o[hk_e >> 1]",
                  cuda_fmt(b, "(hk_e & 1) ? (hk_o[hk_e >> 1] | ((hk_u32)%s(%s) << 16)) : (hk_u32)%s(%s)",
                           cuda_cvt_fn(s->out_dtype), res, cuda_cvt_fn(s->out_dtype), res));
    else if (osz == 4 && s->out_dtype == TINY_FP32) cuda_assign(b, "hk_o[hk_e]", cuda_fmt(b, "hk_f2u(%s)", res));
    else if (osz == 4) cuda_assign(b, "hk_o[hk_e]", cuda_fmt(b, "(hk_u32)hk_f2i(%s)", res));
    else
      cuda_assign(b, "hk_o[hk_e >> 2]",
                  cuda_fmt(b, "((hk_e & 3) ? hk_o[hk_e >> 2] : 0u) | ((hk_u32)hk_f2u8(%s) << ((hk_e & 3) * 8))", res));
    cuda_if(b, "!hk_full");
  }
  /* scalar store (tails, or always when the chunk is not 16 bytes) */
  const char *sv = osz == 2   ? cuda_fmt(b, "%s(%s)", cuda_cvt_fn(s->out_dtype), res)
                   : osz == 1 ? cuda_fmt(b, "hk_f2u8(%s)", res)
                   : s->out_dtype == TINY_FP32 ? cuda_fmt(b, "hk_f2u(%s)", res)
                                               : cuda_fmt(b, "(hk_u32)hk_f2i(%s)", res);
  cuda_stmt *st = cuda_emit_s(b, CU_ST_GLOBAL_VEC, "out + hk_idx", sv, "hk_ok", NULL);
  st->i[0] = osz;
  if (vec_out) cuda_close(b);
}

/* Kernel k's parameters (inputs, out) and metadata for s; vin[i] says
 * whether input i is read in 16-byte vectors of V elements (such inputs,
 * and out when vec_out, get 16-byte alignment). */
static void ew_params(cuda_b *b, cuda_kernel *k, const cuda_ew_spec *s, int64_t numel, int V, bool vec_out, bool *vin) {
  for (int i = 0; i < s->ninputs; i++)
    cuda_param_add(k, cuda_fmt(b, "in%d", i), cuda_ctype(s->in[i].dtype), CUDA_P_PTR_IN, s->in[i].dtype);
  cuda_param_add(k, "out", cuda_ctype(s->out_dtype), CUDA_P_PTR_OUT, s->out_dtype);
  cuda_meta_int(k, "numel", numel);
  cuda_meta_int(k, "vec", V);
  cuda_meta_str(k, "bind", "chunk of vec elements -> thread, grid-stride");
  for (int i = 0; i < s->ninputs; i++) {
    int isz = tiny_dtype_size(s->in[i].dtype);
    vin[i] = ew_contig(s, &s->in[i]) && (isz * V) % 16 == 0;
    if (vin[i] && k->params[i].align < 16) k->params[i].align = 16;
  }
  if (vec_out) k->params[s->ninputs].align = 16;
}

harp_status cuda_gen_ewise(harp_error *e, cuda_module *m, const cuda_ew_spec *s, const char *name) {
  int64_t numel = 1;
  if (ew_check_spec(e, s, name, &numel)) return e->code;
  int T = threads_of(&s->tune);
  if (check_threads(e, name, T)) return e->code;
  int osz = tiny_dtype_size(s->out_dtype);
  int V = s->tune.vec ? s->tune.vec : 16 / osz;
  if (V < 1 || V > 16 || (V & (V - 1))) return ut_fail(e, HARP_E_INVALID_ARG, name, "vector width %d", V);
  bool vec_out = V * osz == 16;
  int64_t nchunks = (numel + V - 1) / V;
  if (nchunks > INT32_MAX / 2) return ut_fail(e, HARP_E_LIMIT, name, "%lld elements: more than 2^30 vectors", (long long)numel);
  int64_t blocks = (nchunks + T - 1) / T;
  if (blocks > 65535 * 8) blocks = 65535 * 8; /* grid-stride loop covers the rest */

  cuda_b bb, *b = &bb;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "ewise");
  if (!k) return e->code;
  k->grid[0] = blocks;
  k->block[0] = T;
  bool vin[CUDA_MAX_EW_IN];
  ew_params(b, k, s, numel, V, vec_out, vin);
  cuda_for_step(b, "hk_ch", cuda_fmt(b, "blockIdx.x * %d + threadIdx.x", T), cuda_fmt(b, "%lld", (long long)nchunks),
                cuda_fmt(b, "%lld", (long long)(blocks * T)), 1);
  cuda_decl(b, "const hk_i64", "hk_base", NULL, cuda_fmt(b, "(hk_i64)hk_ch * %d", V));
  cuda_decl(b, "const bool", "hk_full", NULL, cuda_fmt(b, "hk_base + %d <= %lld", V, (long long)numel));
  ew_load_vectors(b, s, V, vin);
  if (vec_out) cuda_decl(b, "hk_u32", "hk_o", "[4]", NULL);
  cuda_for(b, "hk_e", "0", cuda_fmt(b, "%d", V), -1);
  cuda_decl(b, "const hk_i64", "hk_idx", NULL, "hk_base + hk_e");
  cuda_decl(b, "const bool", "hk_ok", NULL, cuda_fmt(b, "hk_idx < %lld", (long long)numel));
  const char *res = NULL;
  if (ew_values(e, b, s, vin, name, &res)) return e->code;
  ew_store_element(b, s, res, osz, vec_out);
  cuda_close(b); /* hk_e */
  if (vec_out) {
    cuda_if(b, "hk_full");
    cuda_stmt *sg = cuda_emit_s(b, CU_ST_GLOBAL_VEC, "out + hk_base", "hk_v4{hk_o[0], hk_o[1], hk_o[2], hk_o[3]}", NULL, NULL);
    sg->i[0] = 16;
    cuda_close(b);
  }
  cuda_close(b); /* hk_ch */
  return cuda_b_finish(b, k);
}

/* The row loop reads 16-byte vectors when this holds (see row_loop_begin). */
static bool row_vec(tiny_dtype t, int64_t cols, int64_t row_stride) {
  int isz = tiny_dtype_size(t), VE = 16 / isz;
  return isz <= 4 && cols % VE == 0 && row_stride % VE == 0 && t != TINY_BOOL;
}

/* ---- warp-per-row helpers -------------------------------------------------------- */
/* Opens a loop over this lane's elements of row `rowp` (C text pointer of
 * dtype t): inside, `hk_x` is the element (float) and `hk_j` its column.
 * 16-byte vector loads when the row layout allows.  cols_t: the row length
 * as C text read at run time (cols and row_stride then what divides it at
 * every binding), or NULL: the constant cols.  Close with row_loop_end. */
static void row_loop_begin(cuda_b *b, tiny_dtype t, const char *rowp, int64_t cols, int64_t row_stride, const char *cols_t,
                           bool *vec) {
  int VE = 16 / tiny_dtype_size(t);
  *vec = row_vec(t, cols, row_stride);
  if (*vec) {
    const char *n = cols_t ? cuda_fmt(b, "%s / %d", cols_t, VE) : cuda_fmt(b, "%lld", (long long)(cols / VE));
    cuda_for_step(b, "hk_cc", "lane", n, "32", 1);
    cuda_decl(b, "hk_v4", "hk_t", NULL, NULL);
    cuda_stmt *ld = cuda_emit_s(b, CU_LD_GLOBAL, "hk_t", cuda_fmt(b, "%s + (hk_i64)hk_cc * %d", rowp, VE), NULL, NULL);
    ld->i[0] = 16;
    cuda_decl(b, "const hk_u32", "hk_w", "[4]", "{hk_t.x, hk_t.y, hk_t.z, hk_t.w}");
    cuda_for(b, "hk_e", "0", cuda_fmt(b, "%d", VE), -1);
    cuda_decl(b, "const int", "hk_j", NULL, cuda_fmt(b, "hk_cc * %d + hk_e", VE));
    cuda_decl(b, "const float", "hk_x", NULL, unpack(b, t, "hk_w", "hk_e"));
  } else {
    cuda_for_step(b, "hk_j", "lane", cols_t ? cols_t : cuda_fmt(b, "%lld", (long long)cols), "32", 1);
    cuda_decl(b, "const float", "hk_x", NULL, cuda_fmt(b, "%s(%s + hk_j)", cuda_ld_fn(t), rowp));
  }
  cuda_call(b, "(void)hk_j");
}

static void row_loop_end(cuda_b *b, bool vec) {
  cuda_close(b);
  if (vec) cuda_close(b);
}

/* The rows of s as C text: the constant, or a ShapeSet build's run-time
 * count (its size parameters added to k). */
static const char *rows_text(cuda_b *b, cuda_kernel *k, const cuda_rownorm_spec *s) {
  for (int i = 0; i < s->nsyms; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
  if (!s->nrows_sym) return cuda_fmt(b, "%lld", (long long)s->rows);
  const char *t = "";
  for (int i = 0; i < s->nrows_sym; i++) t = cuda_fmt(b, "%shp_sv%d * ", t, s->rows_sym[i]);
  return cuda_fmt(b, "(%s%lldL)", t, (long long)s->rows_lit);
}

/* The row length of s as C text read at run time (its symbols' size
 * parameters, added by rows_text), or NULL when it is the constant cols. */
static const char *cols_text(cuda_b *b, const cuda_rownorm_spec *s) {
  if (!s->rt_cols.n) return NULL;
  const char *t = "";
  for (int i = 0; i < s->rt_cols.n; i++) t = cuda_fmt(b, "%shp_sv%d * ", t, s->rt_cols.sym[i]);
  return cuda_fmt(b, "(%s%lldL)", t, (long long)s->rt_cols.lit);
}

/* Whether s's rows are read as 16-byte vectors: at every binding when the
 * row length is read at run time (its literal factor). */
static bool rn_vec(const cuda_rownorm_spec *s) {
  int64_t w = s->rt_cols.n ? s->rt_cols.lit : s->cols;
  return row_vec(s->in_dtype, w, s->rt_cols.n ? w : s->row_stride);
}

/* Opens the row loop of s over row `rowp` (row_loop_begin). */
static void rn_loop_begin(cuda_b *b, const cuda_rownorm_spec *s, const char *cols_t, bool *vec) {
  int64_t w = s->rt_cols.n ? s->rt_cols.lit : s->cols;
  row_loop_begin(b, s->in_dtype, "xp", w, s->rt_cols.n ? w : s->row_stride, cols_t, vec);
}

/* The row pointers xp, yp of s's kernel at row `row` (cols_t: the run-time
 * row length, or NULL: the constants). */
static void rn_row_ptrs(cuda_b *b, const cuda_rownorm_spec *s, const char *cols_t) {
  const char *rs = cols_t ? cols_t : cuda_fmt(b, "%lld", (long long)s->row_stride);
  const char *cs = cols_t ? cols_t : cuda_fmt(b, "%lld", (long long)s->cols);
  cuda_decl(b, cuda_fmt(b, "const %s *", cuda_ctype(s->in_dtype)), "xp", NULL, cuda_fmt(b, "x + row * %s", rs));
  cuda_decl(b, cuda_fmt(b, "%s *", cuda_ctype(s->out_dtype)), "yp", NULL, cuda_fmt(b, "y + row * %s", cs));
}

static void warp_row_kernel_head(cuda_b *b, cuda_kernel *k, int T, int64_t rows) {
  k->grid[0] = (rows + T / 32 - 1) / (T / 32);
  k->block[0] = T;
  cuda_decl(b, "const int", "lane", NULL, "threadIdx.x & 31");
  cuda_decl(b, "const hk_i64", "row", NULL, cuda_fmt(b, "(hk_i64)blockIdx.x * %d + (threadIdx.x >> 5)", T / 32));
  cuda_meta_str(k, "bind", "row -> warp, columns -> lanes (strided by 32), shfl.bfly reduction");
}

static harp_status grid_ok(harp_error *e, const char *name, const cuda_kernel *k) {
  if (k->grid[0] > 2147483647LL) return ut_fail(e, HARP_E_LIMIT, name, "too many rows");
  return HARP_OK;
}

/* ---- reductions ------------------------------------------------------------------- */
harp_status cuda_gen_reduce(harp_error *e, cuda_module *m, const cuda_reduce_spec *s, const char *name) {
  if (s->outer < 1 || s->red < 1 || s->inner < 1) return ut_fail(e, HARP_E_INVALID_ARG, name, "reduction sizes must be >= 1");
  if (s->s_outer < 0 || s->s_red < 0 || s->s_inner < 0) return ut_fail(e, HARP_E_NEGATIVE_STRIDE, name, "negative stride");
  if (!storage_ok(s->in_dtype) || !storage_ok(s->out_dtype) || s->out_dtype == TINY_BOOL)
    return ut_fail(e, HARP_E_UNSUPPORTED, name, "reduction dtypes %s -> %s", tiny_dtype_name(s->in_dtype),
                   tiny_dtype_name(s->out_dtype));
  if ((unsigned)s->op > TINY_RMIN) return ut_fail(e, HARP_E_INVALID_ARG, name, "unknown reduction");
  int64_t nout;
  if (!ut_mul_ok(s->outer, s->inner, &nout) || nout > ((int64_t)1 << 40)) return ut_fail(e, HARP_E_LIMIT, name, "too large");
  int T = threads_of(&s->tune);
  if (check_threads(e, name, T)) return e->code;
  const char *comb = s->op == TINY_RSUM ? "hk_fadd" : s->op == TINY_RMAX ? "hk_fmax" : "hk_fmin";
  const char *init = s->op == TINY_RSUM ? "0.0f" : s->op == TINY_RMAX ? "-HK_INF" : "HK_INF";
  cuda_b bb, *b = &bb;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "reduce");
  if (!k) return e->code;
  cuda_param_add(k, "in", cuda_ctype(s->in_dtype), CUDA_P_PTR_IN, s->in_dtype);
  if (s->inner == 1 && s->s_red == 1 && row_vec(s->in_dtype, s->red, s->s_outer)) cuda_param_align(k, 16);
  cuda_param_add(k, "out", cuda_ctype(s->out_dtype), CUDA_P_PTR_OUT, s->out_dtype);
  cuda_meta_str(k, "op", tiny_reduce_name(s->op));
  char fi[64];
  flit(fi, sizeof fi, s->init);
  const char *store_v = s->out_dtype == TINY_FP32 ? "hk_f2u(hk_acc)"
                        : s->out_dtype == TINY_I32 ? "(hk_u32)hk_f2i(hk_acc)"
                                                   : cuda_fmt(b, "%s(hk_acc)", cuda_cvt_fn(s->out_dtype));
  int osz = tiny_dtype_size(s->out_dtype);
  if (s->inner == 1) {
    warp_row_kernel_head(b, k, T, s->outer);
    cuda_meta_str(k, "shape", "row (warp per output)");
    cuda_if(b, cuda_fmt(b, "row < %lld", (long long)s->outer));
    cuda_decl(b, cuda_fmt(b, "const %s *", cuda_ctype(s->in_dtype)), "rp", NULL,
              cuda_fmt(b, "in + row * %lld", (long long)s->s_outer));
    cuda_decl(b, "float", "hk_acc", NULL, init);
    bool vec = false;
    if (s->s_red == 1) row_loop_begin(b, s->in_dtype, "rp", s->red, s->s_outer, NULL, &vec);
    else {
      cuda_for_step(b, "hk_j", "lane", cuda_fmt(b, "%lld", (long long)s->red), "32", 1);
      cuda_decl(b, "const float", "hk_x", NULL,
                cuda_fmt(b, "%s(rp + (hk_i64)hk_j * %lld)", cuda_ld_fn(s->in_dtype), (long long)s->s_red));
    }
    cuda_assign(b, "hk_acc", cuda_fmt(b, "%s(hk_acc, hk_x)", comb));
    if (s->s_red == 1) row_loop_end(b, vec);
    else cuda_close(b);
    for (int o = 16; o >= 1; o /= 2) cuda_emit_s(b, CU_SHFL_XOR, "hk_acc", cuda_fmt(b, "%d", o), comb, NULL);
    if (s->has_init) cuda_assign(b, "hk_acc", cuda_fmt(b, "%s(hk_acc, %s)", comb, fi));
    cuda_stmt *st = cuda_emit_s(b, CU_ST_GLOBAL_VEC, "out + row", store_v, "lane == 0", NULL);
    st->i[0] = osz;
    cuda_close(b);
  } else {
    int64_t blocks = (nout + T - 1) / T;
    if (blocks > 2147483647LL) return ut_fail(e, HARP_E_LIMIT, name, "too many outputs");
    k->grid[0] = blocks;
    k->block[0] = T;
    cuda_meta_str(k, "shape", "column (thread per output, coalesced across inner)");
    cuda_meta_str(k, "bind", "output (outer, inner) -> thread");
    cuda_decl(b, "const hk_i64", "hk_o", NULL, cuda_fmt(b, "(hk_i64)blockIdx.x * %d + threadIdx.x", T));
    cuda_if(b, cuda_fmt(b, "hk_o < %lld", (long long)nout));
    cuda_decl(b, "const hk_i64", "hk_a", NULL, cuda_fmt(b, "hk_o / %lld", (long long)s->inner));
    cuda_decl(b, "const hk_i64", "hk_c", NULL, cuda_fmt(b, "hk_o %% %lld", (long long)s->inner));
    cuda_decl(b, cuda_fmt(b, "const %s *", cuda_ctype(s->in_dtype)), "rp", NULL,
              cuda_fmt(b, "in + hk_a * %lld + hk_c * %lld", (long long)s->s_outer, (long long)s->s_inner));
    cuda_decl(b, "float", "hk_acc", NULL, init);
    cuda_for(b, "hk_j", "0", cuda_fmt(b, "%lld", (long long)s->red), 4);
    cuda_assign(b, "hk_acc", cuda_fmt(b, "%s(hk_acc, %s(rp + (hk_i64)hk_j * %lld))", comb, cuda_ld_fn(s->in_dtype),
                                      (long long)s->s_red));
    cuda_close(b);
    if (s->has_init) cuda_assign(b, "hk_acc", cuda_fmt(b, "%s(hk_acc, %s)", comb, fi));
    cuda_stmt *st = cuda_emit_s(b, CU_ST_GLOBAL_VEC, "out + hk_o", store_v, NULL, NULL);
    st->i[0] = osz;
    cuda_close(b);
  }
  if (grid_ok(e, name, k)) return e->code;
  return cuda_b_finish(b, k);
}

/* ---- softmax and layernorm -------------------------------------------------------- */
static harp_status rownorm_check(harp_error *e, const char *name, const cuda_rownorm_spec *s) {
  if (s->rows < 1 || s->cols < 1) return ut_fail(e, HARP_E_INVALID_ARG, name, "rows and cols must be >= 1");
  if (s->row_stride < s->cols) return ut_fail(e, HARP_E_INVALID_ARG, name, "row stride %lld < cols %lld", (long long)s->row_stride, (long long)s->cols);
  tiny_dtype ds[2] = {s->in_dtype, s->out_dtype};
  for (int i = 0; i < 2; i++)
    if (ds[i] != TINY_FP16 && ds[i] != TINY_BF16 && ds[i] != TINY_FP32)
      return ut_fail(e, HARP_E_UNSUPPORTED, name, "dtype %s (fp16, bf16, fp32)", tiny_dtype_name(ds[i]));
  if (s->rows > ((int64_t)1 << 40) || s->cols > INT32_MAX / 2) return ut_fail(e, HARP_E_LIMIT, name, "too large");
  return HARP_OK;
}

static void store_row_elem(cuda_b *b, tiny_dtype t, const char *val) {
  const char *v = t == TINY_FP32 ? cuda_fmt(b, "hk_f2u(%s)", val) : cuda_fmt(b, "%s(%s)", cuda_cvt_fn(t), val);
  cuda_stmt *st = cuda_emit_s(b, CU_ST_GLOBAL_VEC, "yp + hk_j", v, NULL, NULL);
  st->i[0] = tiny_dtype_size(t);
}

harp_status cuda_gen_softmax(harp_error *e, cuda_module *m, const cuda_rownorm_spec *s, const char *name) {
  if (rownorm_check(e, name, s)) return e->code;
  int T = threads_of(&s->tune);
  if (check_threads(e, name, T)) return e->code;
  cuda_b bb, *b = &bb;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "softmax");
  if (!k) return e->code;
  cuda_param_add(k, "x", cuda_ctype(s->in_dtype), CUDA_P_PTR_IN, s->in_dtype);
  if (rn_vec(s)) cuda_param_align(k, 16);
  cuda_param_add(k, "y", cuda_ctype(s->out_dtype), CUDA_P_PTR_OUT, s->out_dtype);
  const char *rows = rows_text(b, k, s), *cols = cols_text(b, s);
  warp_row_kernel_head(b, k, T, s->rows);
  char sc[64];
  flit(sc, sizeof sc, (s->scale != 0 ? s->scale : 1.0f) * 1.44269504088896341);
  cuda_meta_str(k, "algorithm", "online max/sum per lane, merged over the warp; second pass writes");
  cuda_if(b, cuda_fmt(b, "row < %s", rows));
  rn_row_ptrs(b, s, cols);
  cuda_decl(b, "float", "hk_m", NULL, "-HK_INF");
  cuda_decl(b, "float", "hk_l", NULL, "0.0f");
  bool vec;
  rn_loop_begin(b, s, cols, &vec);
  cuda_decl(b, "const float", "hk_s", NULL, cuda_fmt(b, "hk_x * %s", sc));
  cuda_decl(b, "const float", "hk_mn", NULL, "hk_fmax(hk_m, hk_s)");
  cuda_assign(b, "hk_l", "(hk_mn == -HK_INF ? 0.0f : hk_l * hk_exp2(hk_m - hk_mn) + hk_exp2(hk_s - hk_mn))");
  cuda_assign(b, "hk_m", "hk_mn");
  row_loop_end(b, vec);
  cuda_comment(b, "merge (m, l) across the warp: butterfly over lane masks 16..1");
  for (int o = 16; o >= 1; o /= 2) {
    cuda_decl(b, "const float", cuda_fmt(b, "hk_m%d", o), NULL, cuda_fmt(b, "hk_shfl_xor(hk_m, %d)", o));
    cuda_decl(b, "const float", cuda_fmt(b, "hk_l%d", o), NULL, cuda_fmt(b, "hk_shfl_xor(hk_l, %d)", o));
    cuda_decl(b, "const float", cuda_fmt(b, "hk_n%d", o), NULL, cuda_fmt(b, "hk_fmax(hk_m, hk_m%d)", o));
    cuda_assign(b, "hk_l",
                cuda_fmt(b, "hk_n%d == -HK_INF ? 0.0f : hk_l * hk_exp2(hk_m - hk_n%d) + hk_l%d * hk_exp2(hk_m%d - hk_n%d)",
                         o, o, o, o, o));
    cuda_assign(b, "hk_m", cuda_fmt(b, "hk_n%d", o));
  }
  cuda_decl(b, "const float", "hk_inv", NULL, "hk_l > 0.0f ? 1.0f / hk_l : 0.0f");
  cuda_decl(b, "const float", "hk_mu", NULL, "hk_m == -HK_INF ? 0.0f : hk_m");
  rn_loop_begin(b, s, cols, &vec);
  store_row_elem(b, s->out_dtype, cuda_fmt(b, "hk_exp2(hk_x * %s - hk_mu) * hk_inv", sc));
  row_loop_end(b, vec);
  cuda_close(b);
  if (grid_ok(e, name, k)) return e->code;
  return cuda_b_finish(b, k);
}

harp_status cuda_gen_layernorm(harp_error *e, cuda_module *m, const cuda_rownorm_spec *s, const char *name) {
  if (rownorm_check(e, name, s)) return e->code;
  if ((s->has_gamma && !storage_ok(s->gamma_dtype)) || (s->has_beta && !storage_ok(s->beta_dtype)))
    return ut_fail(e, HARP_E_INVALID_ARG, name, "bad gamma/beta dtype");
  int T = threads_of(&s->tune);
  if (check_threads(e, name, T)) return e->code;
  cuda_b bb, *b = &bb;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "layernorm");
  if (!k) return e->code;
  cuda_param_add(k, "x", cuda_ctype(s->in_dtype), CUDA_P_PTR_IN, s->in_dtype);
  if (rn_vec(s)) cuda_param_align(k, 16);
  cuda_param_add(k, "gamma", cuda_ctype(s->has_gamma ? s->gamma_dtype : TINY_FP32), CUDA_P_PTR_IN,
                 s->has_gamma ? s->gamma_dtype : TINY_FP32);
  cuda_param_add(k, "beta", cuda_ctype(s->has_beta ? s->beta_dtype : TINY_FP32), CUDA_P_PTR_IN,
                 s->has_beta ? s->beta_dtype : TINY_FP32);
  cuda_param_add(k, "y", cuda_ctype(s->out_dtype), CUDA_P_PTR_OUT, s->out_dtype);
  const char *rows = rows_text(b, k, s), *cols = cols_text(b, s);
  warp_row_kernel_head(b, k, T, s->rows);
  cuda_meta_str(k, "algorithm", "Welford per lane, Chan merge over the warp, biased variance");
  char eps[64];
  flit(eps, sizeof eps, s->eps);
  cuda_if(b, cuda_fmt(b, "row < %s", rows));
  rn_row_ptrs(b, s, cols);
  cuda_decl(b, "float", "hk_n", NULL, "0.0f");
  cuda_decl(b, "float", "hk_mean", NULL, "0.0f");
  cuda_decl(b, "float", "hk_m2", NULL, "0.0f");
  bool vec;
  rn_loop_begin(b, s, cols, &vec);
  cuda_assign(b, "hk_n", "hk_n + 1.0f");
  cuda_decl(b, "const float", "hk_d", NULL, "hk_x - hk_mean");
  cuda_assign(b, "hk_mean", "hk_mean + hk_d / hk_n");
  cuda_assign(b, "hk_m2", "hk_m2 + hk_d * (hk_x - hk_mean)");
  row_loop_end(b, vec);
  cuda_comment(b, "Chan et al. merge of (n, mean, M2) across the warp");
  for (int o = 16; o >= 1; o /= 2) {
    cuda_decl(b, "const float", cuda_fmt(b, "hk_nb%d", o), NULL, cuda_fmt(b, "hk_shfl_xor(hk_n, %d)", o));
    cuda_decl(b, "const float", cuda_fmt(b, "hk_mb%d", o), NULL, cuda_fmt(b, "hk_shfl_xor(hk_mean, %d)", o));
    cuda_decl(b, "const float", cuda_fmt(b, "hk_qb%d", o), NULL, cuda_fmt(b, "hk_shfl_xor(hk_m2, %d)", o));
    cuda_decl(b, "const float", cuda_fmt(b, "hk_nn%d", o), NULL, cuda_fmt(b, "hk_n + hk_nb%d", o));
    cuda_decl(b, "const float", cuda_fmt(b, "hk_dd%d", o), NULL, cuda_fmt(b, "hk_mb%d - hk_mean", o));
    cuda_decl(b, "const float", cuda_fmt(b, "hk_f%d", o), NULL,
              cuda_fmt(b, "hk_nn%d > 0.0f ? hk_nb%d / hk_nn%d : 0.0f", o, o, o));
    cuda_assign(b, "hk_m2", cuda_fmt(b, "hk_m2 + hk_qb%d + hk_dd%d * hk_dd%d * hk_n * hk_f%d", o, o, o, o));
    cuda_assign(b, "hk_mean", cuda_fmt(b, "hk_mean + hk_dd%d * hk_f%d", o, o));
    cuda_assign(b, "hk_n", cuda_fmt(b, "hk_nn%d", o));
  }
  cuda_decl(b, "const float", "hk_rstd", NULL,
            cols ? cuda_fmt(b, "1.0f / hk_sqrt(hk_m2 / (float)%s + %s)", cols, eps)
                 : cuda_fmt(b, "1.0f / hk_sqrt(hk_m2 / %lld.0f + %s)", (long long)s->cols, eps));
  rn_loop_begin(b, s, cols, &vec);
  const char *val = "(hk_x - hk_mean) * hk_rstd";
  if (s->has_gamma) val = cuda_fmt(b, "%s * %s(gamma + hk_j)", val, cuda_ld_fn(s->gamma_dtype));
  if (s->has_beta) val = cuda_fmt(b, "%s + %s(beta + hk_j)", val, cuda_ld_fn(s->beta_dtype));
  store_row_elem(b, s->out_dtype, val);
  row_loop_end(b, vec);
  cuda_close(b);
  if (grid_ok(e, name, k)) return e->code;
  return cuda_b_finish(b, k);
}

/* A zero kernel `name` in m (builder b) over at most `words` 32-bit words:
 * blocks of 256 threads, one per 256 words up to 1024 (grid-stride), the
 * parameter out; NULL when it cannot be made (e says why). */
static cuda_kernel *zero_kernel_new(cuda_b *b, cuda_module *m, harp_error *e, const char *name, int64_t words) {
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "zero");
  if (!k) return NULL;
  int64_t blocks = (words + 255) / 256;
  k->grid[0] = blocks < 1024 ? blocks : 1024;
  k->block[0] = 256;
  cuda_param_add(k, "out", "hk_u32", CUDA_P_PTR_OUT, TINY_I32);
  cuda_meta_int(k, "words", words);
  return k;
}

/* Zero a run of 32-bit words: grid-stride, one word per thread and step.
 * Split-K's workspace and flags are cleared by a launch of the model (not
 * a host memset) so that a CUDA Graph of the launches replays it too. */
harp_status cuda_gen_zero(harp_error *e, cuda_module *m, int64_t words, const char *name) {
  if (words < 1 || words > ((int64_t)1 << 40)) return ut_fail(e, HARP_E_INVALID_ARG, name, "zero: %lld words", (long long)words);
  cuda_b bb, *b = &bb;
  cuda_kernel *k = zero_kernel_new(b, m, e, name, words);
  if (!k) return e->code;
  cuda_decl(b, "const hk_i64", "hk_step", NULL, cuda_fmt(b, "%lld", (long long)k->grid[0] * 256));
  cuda_open(b, cuda_emit_s(b, CU_LOOP, "hk_w", "(hk_i64)blockIdx.x * 256 + threadIdx.x",
                           cuda_fmt(b, "hk_w < %lld", (long long)words), "hk_step"));
  cuda_stmt *st = cuda_emit_s(b, CU_ST_GLOBAL_VEC, "out + hk_w", "0u", NULL, NULL);
  st->i[0] = 4;
  cuda_close(b);
  return cuda_b_finish(b, k);
}

/* Extent ceil(z / div) of a zeroed region as C text: z's formula at run
 * time, else its literal. */
static const char *zero_extent(cuda_b *b, const cuda_rtsz *z, int64_t div) {
  const char *t = z->n ? cuda_rtsz_text(b, z) : cuda_fmt(b, "%lldL", (long long)z->lit);
  return div > 1 ? cuda_fmt(b, "((%s + %lld) / %lld)", t, (long long)div - 1, (long long)div) : t;
}

harp_status cuda_gen_zero_at(harp_error *e, cuda_module *m, const cuda_zero_at *z, const char *name) {
  int64_t words = z->planes * z->hi_rows * z->hi_cols;
  if (z->planes < 1 || z->hi_rows < 1 || z->hi_cols < 1 || words > ((int64_t)1 << 40) || z->rows_div < 1 || z->cols_div < 1 ||
      z->nsyms < 1 || z->nsyms > 8)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "zero: %lld x %lld x %lld words", (long long)z->planes, (long long)z->hi_rows,
                   (long long)z->hi_cols);
  cuda_b bb, *b = &bb;
  cuda_kernel *k = zero_kernel_new(b, m, e, name, words);
  if (!k) return e->code;
  for (int i = 0; i < z->nsyms; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
  cuda_meta_str(k, "words_at_run_time", "planes x rows x cols of the binding");
  cuda_comment(b, "the binding's rows and columns of each plane (laid out at the box's corner hi)");
  cuda_decl(b, "const hk_i64", "hk_c", NULL, zero_extent(b, &z->cols_sz, z->cols_div));
  cuda_decl(b, "const hk_i64", "hk_pw", NULL, cuda_fmt(b, "%s * hk_c", zero_extent(b, &z->rows_sz, z->rows_div)));
  cuda_decl(b, "const hk_i64", "hk_step", NULL, "(hk_i64)gridDim.x * 256");
  cuda_open(b, cuda_emit_s(b, CU_LOOP, "hk_w", "(hk_i64)blockIdx.x * 256 + threadIdx.x",
                           cuda_fmt(b, "hk_w < %lld * hk_pw", (long long)z->planes), "hk_step"));
  const char *at = cuda_fmt(b, "out + hk_w / hk_pw * %lld + hk_w %% hk_pw / hk_c * %lld + hk_w %% hk_c", (long long)z->plane_stride,
                            (long long)z->row_stride);
  cuda_stmt *st = cuda_emit_s(b, CU_ST_GLOBAL_VEC, at, "0u", NULL, NULL);
  st->i[0] = 4;
  cuda_close(b);
  return cuda_b_finish(b, k);
}

/* Size v of a pack as C text: its formula z at run time, else the literal. */
static const char *pack_sz(cuda_b *b, const cuda_rtsz *z, int64_t v) {
  return z->n ? cuda_rtsz_text(b, z) : cuda_fmt(b, "%lld", (long long)v);
}

/* The checks of pack s (sizes, strides, grid, size parameters). */
static harp_status pack_check(harp_error *e, const cuda_pack_spec *s, const char *name) {
  const int64_t lim = (int64_t)1 << 31;
  if (s->K < 1 || s->N < 1 || s->batch[0] < 1 || s->batch[1] < 1 || s->K > lim || s->N > lim || s->nsyms < 0 || s->nsyms > 8)
    return ut_fail(e, HARP_E_INVALID_ARG, name, "pack: %lld x %lld", (long long)s->K, (long long)s->N);
  if (s->s_k < 0 || s->s_b[0] < 0 || s->s_b[1] < 0) return ut_fail(e, HARP_E_NEGATIVE_STRIDE, name, "pack: a negative stride");
  int64_t gx = (s->N + 31) / 32, gy = (s->K + 31) / 32, gz = s->batch[0] * s->batch[1];
  if (gy > 65535 || gz > 65535) return ut_fail(e, HARP_E_LIMIT, name, "pack: grid %lld x %lld x %lld", (long long)gx, (long long)gy, (long long)gz);
  return HARP_OK;
}

harp_status cuda_gen_pack_tf32(harp_error *e, cuda_module *m, const cuda_pack_spec *s, const char *name) {
  if (pack_check(e, s, name)) return e->code;
  cuda_b bb, *b = &bb;
  cuda_kernel *k = cuda_kernel_new(b, m, e, name, "pack");
  if (!k) return e->code;
  k->grid[0] = (s->N + 31) / 32, k->grid[1] = (s->K + 31) / 32, k->grid[2] = s->batch[0] * s->batch[1];
  k->block[0] = 256; /* 8 warps: warp ty, lane tx */
  k->smem_bytes = 32 * 33 * 4;
  cuda_param_add(k, "in", "float", CUDA_P_PTR_IN, TINY_FP32);
  cuda_param_add(k, "out", "float", CUDA_P_PTR_OUT, TINY_FP32);
  for (int i = 0; i < s->nsyms; i++) cuda_param_add(k, cuda_fmt(b, "hp_sv%d", i), "long", CUDA_P_LONG, TINY_I32);
  cuda_meta_str(k, "layout", "[K][N] -> [N][K], rounded to TF32");
  if (s->nsyms) cuda_meta_str(k, "sizes_at_run_time", "the binding's batches, K and N; the copy laid out at the box's corner hi");
  const char *K = pack_sz(b, &s->rt_k, s->K), *N = pack_sz(b, &s->rt_n, s->N);
  cuda_call(b, "HK_SMEM_DECL(hk_smem)");
  cuda_decl(b, "const hk_saddr", "hk_t", NULL, "hk_smem_addr(hk_smem)");
  cuda_decl(b, "const int", "tx", NULL, "threadIdx.x & 31");
  cuda_decl(b, "const int", "ty", NULL, "threadIdx.x >> 5");
  cuda_decl(b, "const hk_i64", "n0", NULL, "(hk_i64)blockIdx.x * 32");
  cuda_decl(b, "const hk_i64", "k0", NULL, "(hk_i64)blockIdx.y * 32");
  cuda_decl(b, "const hk_i64", "bz", NULL, "blockIdx.z");
  if (s->rt_b[0].n || s->rt_b[1].n) /* the box's batches in grid.z (out's layout at hi): past the binding's, none */
    cuda_call(b, cuda_fmt(b, "if (bz / %lld >= %s || bz %% %lld >= %s) return", (long long)s->batch[1],
                          pack_sz(b, &s->rt_b[0], s->batch[0]), (long long)s->batch[1], pack_sz(b, &s->rt_b[1], s->batch[1])));
  cuda_decl(b, "const float *", "src", NULL,
            cuda_fmt(b, "in + (bz / %lld) * %s + (bz %% %lld) * %s", (long long)s->batch[1], pack_sz(b, &s->rt_sb[0], s->s_b[0]),
                     (long long)s->batch[1], pack_sz(b, &s->rt_sb[1], s->s_b[1])));
  cuda_for(b, "i", "0", "4", -1); /* rows k0 + ty + 8i, column n0 + tx: coalesced over n */
  cuda_decl(b, "const hk_i64", "kk", NULL, "k0 + ty + 8 * i");
  cuda_decl(b, "const hk_i64", "nn", NULL, "n0 + tx");
  cuda_decl(b, "hk_u32", "v", NULL, NULL);
  cuda_emit_s(b, CU_LD_GLOBAL, "v", cuda_fmt(b, "src + kk * %s + nn", pack_sz(b, &s->rt_sk, s->s_k)),
              cuda_fmt(b, "kk < %s && nn < %s", K, N), NULL)->i[0] = 4;
  cuda_emit_s(b, CU_ST_SHARED, "hk_t + ((ty + 8 * i) * 33 + tx) * 4",
              "fabsf(hk_u2f(v)) < HK_INF ? hk_tf32(v) & 0xFFFFE000u : v", NULL, NULL)->i[0] = 4;
  cuda_close(b);
  cuda_emit(b, CU_BARRIER);
  cuda_for(b, "i", "0", "4", -1); /* rows n0 + ty + 8i of out, column k0 + tx: coalesced over k */
  cuda_decl(b, "const hk_i64", "nn", NULL, "n0 + ty + 8 * i");
  cuda_decl(b, "const hk_i64", "kk", NULL, "k0 + tx");
  cuda_decl(b, "hk_u32", "v", NULL, NULL);
  cuda_emit_s(b, CU_LD_SHARED, "v", "hk_t + (tx * 33 + ty + 8 * i) * 4", NULL, NULL)->i[0] = 4;
  cuda_emit_s(b, CU_ST_GLOBAL_VEC, cuda_fmt(b, "out + (bz * %lld + nn) * %lld + kk", (long long)s->N, (long long)s->K), "v",
              cuda_fmt(b, "nn < %s && kk < %s", N, K), NULL)->i[0] = 4;
  cuda_close(b);
  return cuda_b_finish(b, k);
}
