/* core.c — Tiny IR dtypes, shapes and the symbol table (the op table: ops.c).
 * Needs: harp/tiny.h.  Gives: the dtype lookups and shape/symtab helpers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harp/tiny.h"
#include "tiny_spell.h"
#include "util/util.h"

/* ---- dtypes ------------------------------------------------------------- */
static const struct {
  const char *name;
  int size;
  bool is_float;
  const char *c, *cuda, *cuda_ld, *cuda_cvt, *npy;
} dtypes[] = {
#define TINY_X_DT(e, n, b, f, c, cu, ld, cvt, npy) {n, b, f, c, cu, ld, cvt, npy},
    TINY_DTYPES(TINY_X_DT)
#undef TINY_X_DT
};

static bool dt_ok(tiny_dtype t) { return (unsigned)t < TINY_DTYPE_COUNT; }
const char *tiny_dtype_name(tiny_dtype t) { return dt_ok(t) ? dtypes[t].name : "?"; }
int tiny_dtype_size(tiny_dtype t) { return dt_ok(t) ? dtypes[t].size : 0; }
bool tiny_dtype_is_float(tiny_dtype t) { return dt_ok(t) && dtypes[t].is_float; }
const char *tiny_dtype_npy(tiny_dtype t) { return dt_ok(t) ? dtypes[t].npy : "?"; }
const char *tiny_dtype_c(tiny_dtype t) { return dt_ok(t) ? dtypes[t].c : "?"; }
const char *tiny_dtype_cuda(tiny_dtype t) { return dt_ok(t) ? dtypes[t].cuda : "?"; }
const char *tiny_dtype_cuda_ld(tiny_dtype t) { return dt_ok(t) ? dtypes[t].cuda_ld : "?"; }
const char *tiny_dtype_cuda_cvt(tiny_dtype t) { return dt_ok(t) ? dtypes[t].cuda_cvt : "?"; }

int tiny_dtype_parse(const char *s) {
  if (!s) return -1;
  for (int i = 0; i < TINY_DTYPE_COUNT; i++)
    if (strcmp(s, dtypes[i].name) == 0) return i;
  if (strcmp(s, "f16") == 0 || strcmp(s, "float16") == 0) return TINY_FP16;
  if (strcmp(s, "f32") == 0 || strcmp(s, "float32") == 0) return TINY_FP32;
  if (strcmp(s, "bfloat16") == 0) return TINY_BF16;
  if (strcmp(s, "int32") == 0) return TINY_I32;
  return -1;
}

const char *tiny_reduce_name(tiny_reduce_op r) {
  static const char *n[] = {"SUM", "MAX", "MIN"};
  return (unsigned)r < 3 ? n[r] : "?";
}

/* ---- shapes ------------------------------------------------------------- */
int64_t tiny_shape_numel(const tiny_shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->d[i].n < 0) return -1;
    if (!ut_mul_ok(n, s->d[i].n, &n) || n > TINY_MAX_ELEMS) return -2;
  }
  return n;
}

bool tiny_shape_known(const tiny_shape *s) {
  for (int i = 0; i < s->rank; i++)
    if (s->d[i].n < 0) return false;
  return true;
}

bool tiny_shape_equal(const tiny_shape *a, const tiny_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->d[i].n != b->d[i].n) return false;
  return true;
}

void tiny_shape_format(const tiny_shape *s, char *buf, int cap) {
  int k = snprintf(buf, cap, "[");
  for (int i = 0; i < s->rank && k < cap; i++) {
    const tiny_dim *d = &s->d[i];
    const char *sep = i ? ", " : "";
    if (d->sym && d->n >= 0)
      k += snprintf(buf + k, cap - k, "%s%s=%" PRId64, sep, d->sym, d->n);
    else if (d->sym)
      k += snprintf(buf + k, cap - k, "%s%s", sep, d->sym);
    else if (d->n < 0)
      k += snprintf(buf + k, cap - k, "%s?", sep);
    else
      k += snprintf(buf + k, cap - k, "%s%" PRId64, sep, d->n);
  }
  if (k < cap) snprintf(buf + k, cap - k, "]");
}

tiny_shape tiny_shape_of(int rank, const int64_t *dims) {
  tiny_shape s = {0};
  s.rank = rank < 0 ? 0 : (rank > TINY_MAX_RANK ? TINY_MAX_RANK : rank);
  for (int i = 0; i < s.rank; i++) s.d[i] = tiny_dim_int(dims[i]);
  return s;
}

tiny_shape tiny_shape_syms(int rank, const char *const *syms) {
  tiny_shape s = {0};
  s.rank = rank < 0 ? 0 : (rank > TINY_MAX_RANK ? TINY_MAX_RANK : rank);
  for (int i = 0; i < s.rank; i++) s.d[i] = syms[i] ? tiny_dim_sym(syms[i]) : tiny_dim_int(1);
  return s;
}

/* ---- symbol table ------------------------------------------------------- */
void tiny_symtab_init(tiny_symtab *t) { memset(t, 0, sizeof *t); }

void tiny_symtab_free(tiny_symtab *t) {
  for (int i = 0; i < t->n; i++) free(t->names[i]);
  free(t->names);
  free(t->values);
  memset(t, 0, sizeof *t);
}

bool tiny_symtab_get(const tiny_symtab *t, const char *name, int64_t *v) {
  if (!t || !name) return false;
  for (int i = 0; i < t->n; i++)
    if (strcmp(t->names[i], name) == 0) {
      if (v) *v = t->values[i];
      return true;
    }
  return false;
}

harp_status tiny_symtab_set(harp_error *e, tiny_symtab *t, const char *name, int64_t v) {
  int64_t old;
  if (tiny_symtab_get(t, name, &old)) {
    if (old == v) return HARP_OK;
    return ut_fail(e, HARP_E_AXIS_SIZE_MISMATCH, NULL, "symbol %s is bound to both %" PRId64 " and %" PRId64,
                   name, old, v);
  }
  if (t->n == t->cap) {
    int cap = t->cap ? t->cap * 2 : 16;
    char **nn = ut_xrealloc(t->names, sizeof(char *) * cap);
    if (!nn) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    t->names = nn;
    int64_t *vv = ut_xrealloc(t->values, sizeof(int64_t) * cap);
    if (!vv) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    t->values = vv;
    t->cap = cap;
  }
  char *s = ut_xmalloc(strlen(name) + 1);
  if (!s) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  strcpy(s, name);
  t->names[t->n] = s;
  t->values[t->n] = v;
  t->n++;
  return HARP_OK;
}

static bool is_ident(const char *s, size_t n) {
  if (n == 0 || n > 64) return false;
  if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_')) return false;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

harp_status tiny_symtab_parse_assign(harp_error *e, tiny_symtab *t, const char *s) {
  const char *eq = strchr(s, '=');
  if (!eq || !is_ident(s, (size_t)(eq - s)))
    return ut_fail(e, HARP_E_USAGE, NULL, "--sym expects NAME=INT, got '%s'", s);
  char *end;
  long long v = strtoll(eq + 1, &end, 10);
  if (end == eq + 1 || *end || v < 0 || v > TINY_MAX_DIM)
    return ut_fail(e, HARP_E_USAGE, NULL, "--sym %s: value must be an integer in [0, 2^40]", s);
  char name[80];
  snprintf(name, sizeof name, "%.*s", (int)(eq - s), s);
  return tiny_symtab_set(e, t, name, v);
}
