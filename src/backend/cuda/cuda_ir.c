/* cuda_ir.c — the GPU dialect IR: modules, the statement builder the
 * generators use, the structural verifier and the JSON dump (--dump gpu).
 * Needs: cuda.h, jansson.  Gives: cuda_module_*, cuda_b / cuda_emit*,
 * cuda_kernel_verify, cuda_dump_json, name tables, cuda_smem_max,
 * cuda_epi_params and cuda_epi_attach (the fused epilogue's parameters and
 * op list, shared by the templates). */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "tiny/tiny_spell.h"

/* Formula z as {"lit": .., "syms": [i, ..]}, or null when a constant. */
static json_t *rtsz_json(const cuda_rtsz *z) {
  if (!z->n) return json_null();
  json_t *o = json_object(), *a = json_array();
  json_object_set_new(o, "lit", json_integer((json_int_t)z->lit));
  for (int i = 0; i < z->n; i++) json_array_append_new(a, json_integer(z->sym[i]));
  json_object_set_new(o, "syms", a);
  return o;
}

/* A ShapeSet build's map t (some dim or stride read at run time): its
 * formulas as "dims_at_run_time" and "strides_bytes_at_run_time" in tm
 * (null where a constant); nothing for a map of constants. */
static void tmap_rt_json(json_t *tm, const cuda_tmap_desc *t) {
  bool any = false;
  for (int r = 0; r < t->rank && r < CUDA_TMAP_MAX_RANK; r++) any = any || t->rt_dims[r].n || (r && t->rt_strides[r - 1].n);
  if (!any) return;
  json_t *d = json_array(), *st = json_array();
  for (int r = 0; r < t->rank && r < CUDA_TMAP_MAX_RANK; r++) {
    json_array_append_new(d, rtsz_json(&t->rt_dims[r]));
    if (r) json_array_append_new(st, rtsz_json(&t->rt_strides[r - 1]));
  }
  json_object_set_new(tm, "dims_at_run_time", d);
  json_object_set_new(tm, "strides_bytes_at_run_time", st);
}

/* ---- names ------------------------------------------------------------------ */
const char *cuda_arch_name(cuda_arch a) { return a == CUDA_SM90 ? "sm90" : "sm80"; }
bool cuda_arch_parse(const char *s, cuda_arch *out) {
  if (!s || (strcmp(s, "sm80") && strcmp(s, "sm90"))) return false;
  *out = !strcmp(s, "sm90") ? CUDA_SM90 : CUDA_SM80;
  return true;
}
const char *cuda_arch_nvrtc(cuda_arch a) { return a == CUDA_SM90 ? "sm_90a" : "sm_80"; }
bool cuda_arch_runs_on(cuda_arch t, cuda_arch m) { return t == m || (t == CUDA_SM80 && m == CUDA_SM90); }

static const char *const epi_names[CUDA_EPI_COUNT] = {"bias_m", "bias_n", "relu",     "gelu",
                                                      "silu",   "sigmoid", "scale", "residual", "round", "clamp", "rint"};
const char *cuda_epi_name(cuda_epi_kind k) { return (unsigned)k < CUDA_EPI_COUNT ? epi_names[k] : "?"; }

typedef struct stmt_info {
  const char *name, *sops, *iops;
} stmt_info;
static const stmt_info stmt_table[CU_STMT_COUNT] = {
#define CUDA_X_INFO(e, n, s, i) {n, s, i},
    CUDA_STMTS(CUDA_X_INFO)
#undef CUDA_X_INFO
};
const char *cuda_stmt_name(cuda_stmt_kind k) { return (unsigned)k < CU_STMT_COUNT ? stmt_table[k].name : "?"; }

/* The idx-th name of a comma-separated list into buf; false past the end. */
static bool list_item(const char *list, int idx, char *buf, size_t cap) {
  const char *p = list;
  if (!*p) return false;
  for (int i = 0; i < idx; i++) {
    p = strchr(p, ',');
    if (!p) return false;
    p++;
  }
  size_t n = strcspn(p, ",");
  if (n >= cap) n = cap - 1;
  memcpy(buf, p, n);
  buf[n] = 0;
  return true;
}

static int list_len(const char *list) {
  if (!*list) return 0;
  int n = 1;
  for (const char *p = list; *p; p++) n += *p == ',';
  return n;
}

bool cuda_is_cname(const char *s) {
  if (!s || !*s || strlen(s) > 120) return false;
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  for (const char *p = s; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

/* The dtype table's CUDA columns (harp/tiny.h). */
const char *cuda_ctype(tiny_dtype t) { return tiny_dtype_cuda(t); }
const char *cuda_ld_fn(tiny_dtype t) { return tiny_dtype_cuda_ld(t); }
const char *cuda_cvt_fn(tiny_dtype t) { return tiny_dtype_cuda_cvt(t); }

static const char *const math_names[CUDA_MATH_COUNT] = {"tf32", "fp32", "fp16", "bf16"};
const char *cuda_math_name(cuda_math m) { return (unsigned)m < CUDA_MATH_COUNT ? math_names[m] : "?"; }
bool cuda_math_parse(const char *s, cuda_math *out) {
  for (int i = 0; s && i < CUDA_MATH_COUNT; i++)
    if (!strcmp(s, math_names[i])) {
      *out = (cuda_math)i;
      return true;
    }
  return false;
}

void cuda_tune_default(cuda_tune *t, cuda_arch arch) {
  memset(t, 0, sizeof *t);
  t->arch = arch;
}

/* ---- module ----------------------------------------------------------------- */
harp_status cuda_module_new(harp_error *e, cuda_arch arch, cuda_module **out) {
  *out = NULL;
  cuda_module *m = ut_xcalloc(1, sizeof *m);
  if (!m) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  m->arena = ut_arena_new();
  if (!m->arena) {
    free(m);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  m->arch = arch;
  *out = m;
  return HARP_OK;
}

void cuda_module_free(cuda_module *m) {
  if (!m) return;
  ut_arena_free(m->arena);
  free(m->k);
  free(m);
}

harp_status cuda_module_helpers(harp_error *e, cuda_module *m, const char *text) {
  for (int i = 0; i < m->nhelpers; i++)
    if (m->helpers[i] == text) return HARP_OK;
  if (m->nhelpers >= CUDA_MAX_HELPERS) return ut_fail(e, HARP_E_LIMIT, NULL, "more than %d helper blocks", CUDA_MAX_HELPERS);
  m->helpers[m->nhelpers++] = text;
  return HARP_OK;
}

const cuda_kernel *cuda_module_find(const cuda_module *m, const char *name) {
  for (int i = 0; i < m->n; i++)
    if (!strcmp(m->k[i]->name, name)) return m->k[i];
  return NULL;
}

/* ---- builder ---------------------------------------------------------------- */
const char *cuda_fmt(cuda_b *b, const char *fmt, ...) {
  if (!fmt) return NULL;
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *s = n >= 0 ? ut_arena_alloc(b->a, (size_t)n + 1) : NULL;
  if (!s) {
    b->oom = true;
    va_end(ap2);
    return "";
  }
  vsnprintf(s, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return s;
}

static const char *adup(cuda_b *b, const char *s) {
  if (!s) return NULL;
  char *d = ut_arena_strdup(b->a, s);
  if (!d) b->oom = true;
  return d ? d : "";
}

static bool push_child(cuda_b *b, cuda_stmt ***list, int *n, int *cap, cuda_stmt *c) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 8;
    cuda_stmt **nl = ut_arena_alloc(b->a, sizeof(cuda_stmt *) * (size_t)nc);
    if (!nl) return false;
    if (*n) memcpy(nl, *list, sizeof(cuda_stmt *) * (size_t)*n);
    *list = nl;
    *cap = nc;
  }
  (*list)[(*n)++] = c;
  return true;
}

cuda_stmt *cuda_emit(cuda_b *b, cuda_stmt_kind k) {
  cuda_stmt *st = ut_arena_alloc(b->a, sizeof *st);
  if (!st) {
    b->oom = true;
    memset(&b->sink, 0, sizeof b->sink); /* never linked into a tree; lets callers write through */
    return &b->sink;
  }
  st->kind = k;
  if (b->depth > 0) {
    cuda_stmt *parent = b->stack[b->depth - 1];
    bool ok = b->in_else[b->depth - 1] ? push_child(b, &parent->els, &parent->nels, &parent->capels, st)
                                       : push_child(b, &parent->body, &parent->nbody, &parent->capbody, st);
    if (!ok) b->oom = true;
  }
  return st;
}

cuda_stmt *cuda_emit_s(cuda_b *b, cuda_stmt_kind k, const char *s0, const char *s1, const char *s2,
                       const char *s3) {
  cuda_stmt *st = cuda_emit(b, k);
  st->s[0] = adup(b, s0);
  st->s[1] = adup(b, s1);
  st->s[2] = adup(b, s2);
  st->s[3] = adup(b, s3);
  return st;
}

void cuda_open(cuda_b *b, cuda_stmt *st) {
  if (b->depth >= CUDA_B_DEPTH) {
    b->oom = true; /* reported as an internal error by cuda_b_finish */
    return;
  }
  b->in_else[b->depth] = false;
  b->stack[b->depth++] = st;
}

void cuda_else(cuda_b *b) {
  if (b->depth > 0) b->in_else[b->depth - 1] = true;
}

void cuda_close(cuda_b *b) {
  if (b->depth > 1) b->depth--;
}

void cuda_for(cuda_b *b, const char *var, const char *begin, const char *end, int unroll) {
  cuda_stmt *st = cuda_emit_s(b, CU_FOR, var, begin, end, "1");
  st->i[0] = unroll;
  cuda_open(b, st);
}

void cuda_for_step(cuda_b *b, const char *var, const char *begin, const char *end, const char *step, int unroll) {
  cuda_stmt *st = cuda_emit_s(b, CU_FOR, var, begin, end, step);
  st->i[0] = unroll;
  cuda_open(b, st);
}

void cuda_if(cuda_b *b, const char *cond) { cuda_open(b, cuda_emit_s(b, CU_IF, cond, NULL, NULL, NULL)); }

void cuda_decl(cuda_b *b, const char *type, const char *name, const char *dims, const char *init) {
  cuda_emit_s(b, CU_DECL, type, name, dims, init);
}

void cuda_assign(cuda_b *b, const char *lhs, const char *rhs) { cuda_emit_s(b, CU_ASSIGN, lhs, rhs, NULL, NULL); }
void cuda_call(cuda_b *b, const char *text) { cuda_emit_s(b, CU_CALL, text, NULL, NULL, NULL); }
void cuda_comment(cuda_b *b, const char *text) { cuda_emit_s(b, CU_COMMENT, text, NULL, NULL, NULL); }

cuda_kernel *cuda_kernel_new(cuda_b *b, cuda_module *m, harp_error *e, const char *name, const char *kind) {
  memset(b, 0, sizeof *b);
  b->a = m->arena;
  b->e = e;
  if (!cuda_is_cname(name)) {
    ut_fail(e, HARP_E_INVALID_ARG, name, "kernel name is not a C identifier");
    return NULL;
  }
  if (cuda_module_find(m, name)) {
    ut_fail(e, HARP_E_DUPLICATE_ID, name, "two kernels named '%s' in one module", name);
    return NULL;
  }
  cuda_kernel *k = ut_arena_alloc(m->arena, sizeof *k);
  if (!k) {
    ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    return NULL;
  }
  k->name = ut_arena_strdup(m->arena, name);
  k->kind = kind;
  k->arch = m->arch;
  k->grid[0] = k->grid[1] = k->grid[2] = 1;
  k->block[0] = 128;
  k->block[1] = k->block[2] = 1;
  k->body = ut_arena_alloc(m->arena, sizeof *k->body);
  if (!k->name || !k->body) {
    ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    return NULL;
  }
  k->body->kind = CU_BLOCK;
  b->stack[0] = k->body;
  b->depth = 1;
  /* Register the kernel now so that the arena owns it either way; a failed
   * generator leaves it in place but the caller discards the module. */
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 8;
    cuda_kernel **nk = ut_xrealloc(m->k, sizeof(cuda_kernel *) * (size_t)cap);
    if (!nk) {
      ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
      return NULL;
    }
    m->k = nk;
    m->cap = cap;
  }
  m->k[m->n++] = k;
  return k;
}

void cuda_param_add(cuda_kernel *k, const char *name, const char *ctype, cuda_param_kind kind, tiny_dtype dt) {
  if (k->nparams >= CUDA_MAX_PARAMS) {
    k->nparams = CUDA_MAX_PARAMS + 1; /* caught by the verifier */
    return;
  }
  k->params[k->nparams++] = (cuda_param){name, ctype, kind, dt, NULL, kind == CUDA_P_TMAP ? 64 : kind == CUDA_P_LONG ? 0 : tiny_dtype_size(dt)};
}

void cuda_param_align(cuda_kernel *k, int bytes) {
  if (k->nparams > 0 && k->nparams <= CUDA_MAX_PARAMS && bytes > k->params[k->nparams - 1].align)
    k->params[k->nparams - 1].align = bytes;
}

void cuda_meta_int(cuda_kernel *k, const char *key, int64_t v) {
  if (k->nmeta < CUDA_MAX_META) k->meta[k->nmeta++] = (cuda_meta){key, NULL, v};
}
void cuda_meta_str(cuda_kernel *k, const char *key, const char *v) {
  if (k->nmeta < CUDA_MAX_META) k->meta[k->nmeta++] = (cuda_meta){key, v, 0};
}

void cuda_epi_params(cuda_b *b, cuda_kernel *k, const cuda_epi *epi, int n) {
  for (int i = 0; i < n; i++) {
    bool has = epi[i].kind == CUDA_EPI_BIAS_M || epi[i].kind == CUDA_EPI_BIAS_N || epi[i].kind == CUDA_EPI_RESIDUAL;
    cuda_param_add(k, cuda_fmt(b, "ep%d", i), has ? cuda_ctype(epi[i].dtype) : "float", CUDA_P_PTR_IN,
                   has ? epi[i].dtype : TINY_FP32);
  }
}

void cuda_epi_attach(cuda_b *b, cuda_stmt *ep, const cuda_epi *epi, const char *const *ptr, int n) {
  if (n <= 0) return;
  ep->epi = ut_arena_alloc(b->a, sizeof(cuda_epi_ir) * (size_t)n);
  if (!ep->epi) {
    b->oom = true;
    return;
  }
  ep->nepi = n;
  for (int i = 0; i < n; i++) {
    ep->epi[i].e = epi[i];
    ep->epi[i].ptr = ptr[i];
  }
}

harp_status cuda_b_finish(cuda_b *b, cuda_kernel *k) {
  if (b->oom) return ut_fail(b->e, HARP_E_NO_MEMORY, k->name, "out of memory while building kernel");
  if (b->depth != 1) return ut_fail(b->e, HARP_E_INTERNAL, k->name, "unbalanced statement nesting (%d open)", b->depth - 1);
  return cuda_kernel_verify(b->e, k);
}

/* ---- verifier --------------------------------------------------------------- */
/* Every operand of st that the table row si names is present, except the
 * optional ones; k names the kernel in the error. */
static harp_status verify_operands(harp_error *e, const cuda_kernel *k, const cuda_stmt *st, const stmt_info *si) {
  int ns = list_len(si->sops);
  for (int i = 0; i < ns; i++) {
    char nm[32];
    list_item(si->sops, i, nm, sizeof nm);
    bool optional = !strcmp(nm, "pred") || !strcmp(nm, "init") || !strcmp(nm, "dims") || !strcmp(nm, "step") ||
                    !strcmp(nm, "src_bytes") || !strcmp(nm, "rows") || !strcmp(nm, "cols");
    if (!st->s[i] && !optional)
      return ut_fail(e, HARP_E_INTERNAL, k->name, "%s lacks operand '%s'", si->name, nm);
  }
  return HARP_OK;
}

/* st's sizes and names for its kind (row si): access widths, ldmatrix
 * counts, MMA shapes and dtypes, loop and declaration names. */
static harp_status verify_kind(harp_error *e, const cuda_kernel *k, const cuda_stmt *st, const stmt_info *si) {
  switch (st->kind) {
  case CU_CP_ASYNC:
    if (st->i[0] != 4 && st->i[0] != 8 && st->i[0] != 16)
      return ut_fail(e, HARP_E_INTERNAL, k->name, "CpAsync of %lld bytes", (long long)st->i[0]);
    break;
  case CU_LDMATRIX:
    if (st->i[0] != 1 && st->i[0] != 2 && st->i[0] != 4)
      return ut_fail(e, HARP_E_INTERNAL, k->name, "LdMatrix .x%lld", (long long)st->i[0]);
    break;
  case CU_MMA_SYNC: /* m16n8k16 .f16/.bf16, or m16n8k8 .tf32 (dtype FP32) */
  case CU_WGMMA:    /* m64nNk16 .f16/.bf16, or m64nNk8 .tf32 */
    if (st->i[2] != (st->dtype == TINY_FP32 ? 8 : 16) ||
        (st->dtype != TINY_FP32 && st->dtype != TINY_FP16 && st->dtype != TINY_BF16))
      return ut_fail(e, HARP_E_INTERNAL, k->name, "%s k%lld of %s", si->name, (long long)st->i[2], tiny_dtype_name(st->dtype));
    break;
  case CU_ST_GLOBAL_VEC:
  case CU_LD_GLOBAL:
  case CU_ST_SHARED:
  case CU_LD_SHARED:
    if (st->i[0] != 1 && st->i[0] != 2 && st->i[0] != 4 && st->i[0] != 8 && st->i[0] != 16)
      return ut_fail(e, HARP_E_INTERNAL, k->name, "%s of %lld bytes", si->name, (long long)st->i[0]);
    break;
  case CU_FOR:
  case CU_LOOP:
    if (!cuda_is_cname(st->s[0])) return ut_fail(e, HARP_E_INTERNAL, k->name, "%s variable is not a C name", si->name);
    break;
  case CU_DECL:
    if (!cuda_is_cname(st->s[1])) return ut_fail(e, HARP_E_INTERNAL, k->name, "Decl name is not a C name");
    break;
  default: break;
  }
  return HARP_OK;
}

/* Checks st of kernel k (depth levels down) and its bodies against the
 * statement table: operands, sizes, and bodies only where a kind nests. */
static harp_status verify_stmt(harp_error *e, const cuda_kernel *k, const cuda_stmt *st, int depth) {
  if (depth > 64) return ut_fail(e, HARP_E_INTERNAL, k->name, "statement tree too deep");
  if ((unsigned)st->kind >= CU_STMT_COUNT) return ut_fail(e, HARP_E_INTERNAL, k->name, "bad statement kind %d", st->kind);
  const stmt_info *si = &stmt_table[st->kind];
  if (verify_operands(e, k, st, si) || verify_kind(e, k, st, si)) return e->code;
  bool nests = st->kind == CU_BLOCK || st->kind == CU_FOR || st->kind == CU_IF || st->kind == CU_LOOP;
  if (!nests && (st->nbody || st->nels)) return ut_fail(e, HARP_E_INTERNAL, k->name, "%s has a body", si->name);
  for (int i = 0; i < st->nbody; i++)
    if (verify_stmt(e, k, st->body[i], depth + 1)) return e->code;
  for (int i = 0; i < st->nels; i++)
    if (verify_stmt(e, k, st->els[i], depth + 1)) return e->code;
  return HARP_OK;
}

harp_status cuda_kernel_verify(harp_error *e, const cuda_kernel *k) {
  if (!cuda_is_cname(k->name)) return ut_fail(e, HARP_E_INTERNAL, k->name, "kernel name is not a C name");
  if (k->nparams > CUDA_MAX_PARAMS) return ut_fail(e, HARP_E_LIMIT, k->name, "more than %d kernel parameters", CUDA_MAX_PARAMS);
  for (int i = 0; i < k->nparams; i++) {
    if (!cuda_is_cname(k->params[i].name)) return ut_fail(e, HARP_E_INTERNAL, k->name, "parameter %d is not a C name", i);
    for (int j = 0; j < i; j++)
      if (!strcmp(k->params[i].name, k->params[j].name))
        return ut_fail(e, HARP_E_INTERNAL, k->name, "parameter '%s' twice", k->params[i].name);
  }
  if (k->block[0] <= 0 || k->block[0] % 32 || k->block[0] > 1024 || k->block[1] != 1 || k->block[2] != 1)
    return ut_fail(e, HARP_E_INTERNAL, k->name, "block (%d,%d,%d) is not a whole number of warps", k->block[0],
                   k->block[1], k->block[2]);
  if (k->grid[0] < 1 || k->grid[1] < 1 || k->grid[2] < 1 || k->grid[0] > 2147483647LL || k->grid[1] > 65535 ||
      k->grid[2] > 65535)
    return ut_fail(e, HARP_E_LIMIT, k->name, "grid (%lld,%lld,%lld) outside the launch limits", (long long)k->grid[0],
                   (long long)k->grid[1], (long long)k->grid[2]);
  if (!k->body || k->body->kind != CU_BLOCK) return ut_fail(e, HARP_E_INTERNAL, k->name, "kernel body is not a Block");
  return verify_stmt(e, k, k->body, 0);
}

/* ---- JSON dump -------------------------------------------------------------- */
static json_t *stmt_json(const cuda_stmt *st);

static json_t *stmts_json(cuda_stmt *const *list, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, stmt_json(list[i]));
  return a;
}

static json_t *stmt_json(const cuda_stmt *st) {
  const stmt_info *si = &stmt_table[st->kind];
  json_t *o = json_object();
  json_object_set_new(o, "op", json_string(si->name));
  char nm[32];
  for (int i = 0; list_item(si->sops, i, nm, sizeof nm); i++)
    if (st->s[i]) json_object_set_new(o, nm, json_string(st->s[i]));
  for (int i = 0; list_item(si->iops, i, nm, sizeof nm); i++) json_object_set_new(o, nm, json_integer(st->i[i]));
  if (st->kind == CU_MMA_SYNC || st->kind == CU_WGMMA)
    json_object_set_new(o, "dtype", json_string(tiny_dtype_name(st->dtype)));
  if (st->kind == CU_EPILOGUE) {
    json_object_set_new(o, "out_dtype", json_string(tiny_dtype_name(st->dtype)));
    json_t *ops = json_array();
    for (int i = 0; i < st->nepi; i++) {
      const cuda_epi_ir *ep = &st->epi[i];
      json_t *x = json_object();
      json_object_set_new(x, "op", json_string(cuda_epi_name(ep->e.kind)));
      if (ep->ptr) {
        json_object_set_new(x, "tensor", json_string(ep->ptr));
        json_object_set_new(x, "dtype", json_string(tiny_dtype_name(ep->e.dtype)));
      }
      if (ep->e.kind == CUDA_EPI_SCALE) json_object_set_new(x, "scale", json_real(ep->e.scale));
      if (ep->e.kind == CUDA_EPI_SCALE && ep->e.shift != 0.0f) json_object_set_new(x, "shift", json_real(ep->e.shift));
      if (ep->ptr && ep->e.mul) json_object_set_new(x, "mul", json_true());
      if (ep->e.kind == CUDA_EPI_ROUND) json_object_set_new(x, "to", json_string(tiny_dtype_name(ep->e.dtype)));
      if (ep->e.kind == CUDA_EPI_CLAMP && isfinite(ep->e.lo)) json_object_set_new(x, "lo", json_real(ep->e.lo));
      if (ep->e.kind == CUDA_EPI_CLAMP && isfinite(ep->e.hi)) json_object_set_new(x, "hi", json_real(ep->e.hi));
      if (ep->e.kind == CUDA_EPI_RESIDUAL) {
        json_t *s = json_array();
        json_array_append_new(s, json_integer(ep->e.s_m));
        json_array_append_new(s, json_integer(ep->e.s_n));
        json_object_set_new(x, "strides_mn", s);
        if (ep->s_m_t) json_object_set_new(x, "s_m_at_run_time", json_string(ep->s_m_t));
        if (ep->s_n_t) json_object_set_new(x, "s_n_at_run_time", json_string(ep->s_n_t));
      }
      json_array_append_new(ops, x);
    }
    json_object_set_new(o, "ops", ops);
  }
  if (st->kind == CU_BLOCK || st->kind == CU_FOR || st->kind == CU_IF || st->kind == CU_LOOP)
    json_object_set_new(o, "body", stmts_json(st->body, st->nbody));
  if (st->kind == CU_IF && st->nels) json_object_set_new(o, "else", stmts_json(st->els, st->nels));
  return o;
}

static json_t *kernel_json(const cuda_kernel *k) {
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string(k->name));
  json_object_set_new(o, "kind", json_string(k->kind));
  json_object_set_new(o, "arch", json_string(cuda_arch_name(k->arch)));
  json_t *g = json_array(), *bl = json_array();
  for (int i = 0; i < 3; i++) {
    json_array_append_new(g, json_integer(k->grid[i]));
    json_array_append_new(bl, json_integer(k->block[i]));
  }
  json_object_set_new(o, "grid", g);
  if (k->persistent_tiles > 0) json_object_set_new(o, "persistent_tiles", json_integer(k->persistent_tiles));
  if (k->own) { /* one kernel of a pair: the bindings it serves */
    json_t *ow = json_object(), *st = json_array();
    json_object_set_new(ow, "aligned", json_boolean(k->own->aligned));
    for (int i = 0; i < k->own->n; i++) json_array_append_new(st, rtsz_json(&k->own->st[i]));
    json_object_set_new(ow, "strides_bytes", st);
    json_object_set_new(o, "serves", ow);
  }
  json_object_set_new(o, "block", bl);
  json_object_set_new(o, "smem_bytes", json_integer(k->smem_bytes));
  json_t *ps = json_array();
  for (int i = 0; i < k->nparams; i++) {
    const cuda_param *p = &k->params[i];
    json_t *x = json_object();
    json_object_set_new(x, "name", json_string(p->name));
    json_object_set_new(x, "kind", json_string(p->kind == CUDA_P_PTR_IN    ? "in"
                                               : p->kind == CUDA_P_PTR_OUT ? "out"
                                               : p->kind == CUDA_P_LONG    ? "size"
                                                                            : "tensor_map"));
    if (p->kind != CUDA_P_TMAP && p->kind != CUDA_P_LONG) {
      json_object_set_new(x, "dtype", json_string(tiny_dtype_name(p->dtype)));
      json_object_set_new(x, "align", json_integer(p->align));
    }
    if (p->tmap) {
      const cuda_tmap_desc *t = p->tmap;
      json_t *tm = json_object(), *d = json_array(), *st = json_array(), *bx = json_array();
      json_object_set_new(tm, "tensor", json_string(t->tensor));
      json_object_set_new(tm, "dtype", json_string(tiny_dtype_name(t->dtype)));
      for (int r = 0; r < t->rank; r++) {
        json_array_append_new(d, json_integer((json_int_t)t->dims[r]));
        json_array_append_new(bx, json_integer(t->box[r]));
        if (r) json_array_append_new(st, json_integer((json_int_t)t->strides[r - 1]));
      }
      json_object_set_new(tm, "dims", d);
      json_object_set_new(tm, "strides_bytes", st);
      json_object_set_new(tm, "box", bx);
      json_object_set_new(tm, "swizzle", json_string(t->swizzle == 3 ? "128B" : "none"));
      tmap_rt_json(tm, t);
      json_object_set_new(x, "tensor_map", tm);
    }
    json_array_append_new(ps, x);
  }
  json_object_set_new(o, "params", ps);
  json_t *meta = json_object();
  for (int i = 0; i < k->nmeta; i++)
    json_object_set_new(meta, k->meta[i].key,
                        k->meta[i].str ? json_string(k->meta[i].str) : json_integer(k->meta[i].num));
  json_object_set_new(o, "plan", meta);
  json_object_set_new(o, "body", stmts_json(k->body->body, k->body->nbody));
  return o;
}

harp_status cuda_dump_json(harp_error *e, const cuda_module *m, char **out) {
  *out = NULL;
  json_t *root = json_object(), *gpu = json_object(), *ks = json_array();
  json_object_set_new(root, "gpu", gpu);
  json_object_set_new(gpu, "arch", json_string(cuda_arch_name(m->arch)));
  for (int i = 0; i < m->n; i++) json_array_append_new(ks, kernel_json(m->k[i]));
  json_object_set_new(gpu, "kernels", ks);
  char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!s) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory while dumping the GPU dialect");
  *out = s; /* malloc'd by jansson: the caller free()s it */
  return HARP_OK;
}

int64_t cuda_smem_max(cuda_arch a) { return a == CUDA_SM90 ? 232448 : 166912; }

const char *cuda_splitk_name(cuda_splitk k) {
  return k == CUDA_SPLITK_SERIAL ? "splitk_serial" : k == CUDA_SPLITK_REDUCE ? "splitk_reduce" : "splitk_parallel";
}
