/* kdedup.c — kernels of one translation unit that are the same code.
 * Needs: util.  Gives: cg_kform_make, cg_kform_free, cg_kform_same,
 * cg_kform_aliases.
 *
 * A model repeats its layers (BERT's twelve, a ResNet stage's blocks, the
 * q/k/v projections of one attention), and each layer's kernels come out of
 * the templates as the same text but for their names.  The C compiler's time
 * (NVRTC's for the GPU) grows with the text, so the emitter keeps one copy
 * and points the others at it (emit_model.c for C, cuda_dedup.c for CUDA).
 *
 * Two kernel texts are the same code when they are equal after
 *   - comments are dropped (they name regions and tensors),
 *   - the kernel's own prefix (fn, fn_*) is replaced by one placeholder,
 *   - the loop nest's locals (L12_x, A12_x, N12_x: rc_local_name) are renamed
 *     in order of first appearance,
 *   - the buffer indices bufs[i] (C) or the buffer parameters' names
 *     (CUDA: a __global__ function's pointers, `params`) are renumbered in
 *     order of first appearance.
 * The last makes the match a permutation of the kernel's buffers: `order`
 * lists, for the j-th buffer first read in the text, its index in the
 * kernel's own bufs[] (its parameter list); the caller passes kernel k's
 * buffers to the copy in the copy's order.  A text that uses `bufs` other
 * than as bufs[<literal>] or as a whole array is never matched.  With
 * `params`, parameters the text never names follow in declared order (every
 * parameter has a place), and a name after `.` or `->` is a member, never a
 * parameter (v.x stays v.x when x is also a parameter). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "backend/common/kdedup.h"

#define MAX_BUFS 256

static bool ident_start(char ch) { return isalpha((unsigned char)ch) || ch == '_'; }
static bool ident_char(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

/* L12_x, A3_y, N7_z: the loop nest's locals */
static bool is_local(const char *t, size_t n) {
  if (n < 3 || (t[0] != 'L' && t[0] != 'A' && t[0] != 'N') || !isdigit((unsigned char)t[1])) return false;
  size_t i = 1;
  while (i < n && isdigit((unsigned char)t[i])) i++;
  return i < n && t[i] == '_';
}

/* the kernel's own symbol: fn itself or fn_<suffix> */
static bool is_own(const char *t, size_t n, const char *fn, size_t fl) {
  return n >= fl && !memcmp(t, fn, fl) && (n == fl || t[fl] == '_');
}

typedef struct norm_ctx {
  ut_str *o;
  ut_arena *a;
  ut_strmap locals;
  const char *const *params; /* CUDA: the parameters' names, or NULL (bufs[i]) */
  int nparams;
  int bufs_seen[MAX_BUFS]; /* original index -> canonical + 1, or 0 */
  int *order, norder;
  bool ok;
} norm_ctx;

/* where one of cg_kform_make's cases starts; other text is copied as it is */
static bool special(const char *p) {
  return (p[0] == '/' && (p[1] == '*' || p[1] == '/')) || *p == '"' || *p == '\'' || isdigit((unsigned char)*p) ||
         ident_start(*p);
}

/* bufs[<digits>] at p (just past "bufs"): renumbered; returns the end, or
 * NULL when this is not a literal index (then bufs must be a whole array:
 * followed by , ) ; or }) */
static const char *bufs_index(norm_ctx *x, const char *p) {
  if (*p != '[') {
    while (*p == ' ') p++;
    if (*p != ',' && *p != ')' && *p != ';' && *p != '}') x->ok = false;
    return NULL;
  }
  const char *q = p + 1;
  long v = 0;
  if (!isdigit((unsigned char)*q)) return x->ok = false, NULL;
  while (isdigit((unsigned char)*q) && v < MAX_BUFS) v = v * 10 + (*q++ - '0');
  if (*q != ']' || v >= MAX_BUFS) return x->ok = false, NULL;
  if (!x->bufs_seen[v]) {
    x->order[x->norder] = (int)v;
    x->bufs_seen[v] = ++x->norder;
  }
  ut_str_printf(x->o, "bufs[%d]", x->bufs_seen[v] - 1);
  return q + 1;
}

/* parameter i by name (the first of equal names), or -1 */
static int param_of(const norm_ctx *x, const char *s, size_t n) {
  for (int i = 0; i < x->nparams; i++)
    if (strlen(x->params[i]) == n && !memcmp(x->params[i], s, n)) return i;
  return -1;
}

static void param_seen(norm_ctx *x, int i) {
  if (!x->bufs_seen[i]) {
    x->order[x->norder] = i;
    x->bufs_seen[i] = ++x->norder;
  }
}

/* the identifier at s is a member: after `.` or `->` (spaces between) */
static bool is_member(const char *text, const char *s) {
  while (s > text && (s[-1] == ' ' || s[-1] == '\t' || s[-1] == '\n')) s--;
  return (s > text && s[-1] == '.') || (s - text >= 2 && s[-2] == '-' && s[-1] == '>');
}

harp_status cg_kform_make(const char *text, const char *fn, const char *const *params, int nparams, harp_error *e,
                        cg_kform *out) {
  memset(out, 0, sizeof *out);
  if (nparams > MAX_BUFS) nparams = MAX_BUFS, params = NULL; /* never matched (below) */
  ut_str o;
  ut_str_init(&o);
  norm_ctx x = {.o = &o, .a = ut_arena_new(), .params = params, .nparams = params ? nparams : 0,
                .order = ut_xcalloc(MAX_BUFS, sizeof(int)), .ok = params || !nparams};
  size_t fl = strlen(fn);
  for (const char *p = text; *p && x.a && x.order;) {
    if (p[0] == '/' && p[1] == '*') { /* comments name regions: dropped */
      const char *end = strstr(p + 2, "*/");
      p = end ? end + 2 : p + strlen(p);
      ut_str_putc(&o, ' ');
    } else if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') p++;
    } else if (*p == '"' || *p == '\'') { /* literals verbatim */
      char q = *p;
      const char *s = p++;
      while (*p && *p != q) p += p[0] == '\\' && p[1] ? 2 : 1;
      if (*p) p++;
      ut_str_putn(&o, s, (size_t)(p - s));
    } else if (isdigit((unsigned char)*p)) { /* 1e5f, 0x1fu: not identifiers */
      const char *s = p;
      while (ident_char(*p) || *p == '.') p++;
      ut_str_putn(&o, s, (size_t)(p - s));
    } else if (ident_start(*p)) {
      const char *s = p;
      while (ident_char(*p)) p++;
      size_t n = (size_t)(p - s);
      int pi = x.params && !is_member(text, s) ? param_of(&x, s, n) : -1;
      if (pi >= 0) {
        param_seen(&x, pi);
        ut_str_printf(&o, "P$%d", x.bufs_seen[pi] - 1);
      } else if (is_own(s, n, fn, fl)) {
        ut_str_puts(&o, "K$");
        ut_str_putn(&o, s + fl, n - fl);
      } else if (is_local(s, n)) {
        char *key = ut_arena_strndup(x.a, s, n);
        int *v = key ? ut_strmap_find(&x.locals, key) : NULL;
        int id = v ? *v : x.locals.n;
        if (!key || (!v && !ut_strmap_put(&x.locals, key, id))) {
          o.oom = true;
          break;
        }
        ut_str_printf(&o, "V$%d", id);
      } else if (!x.params && n == 4 && !memcmp(s, "bufs", 4)) {
        const char *q = bufs_index(&x, p);
        if (q) p = q;
        else ut_str_puts(&o, "bufs");
      } else {
        ut_str_putn(&o, s, n);
      }
    } else { /* punctuation and blanks, up to the next case */
      const char *s = p++;
      while (*p && !special(p)) p++;
      ut_str_putn(&o, s, (size_t)(p - s));
    }
  }
  for (int i = 0; x.order && i < x.nparams; i++) param_seen(&x, i); /* the unnamed ones: declared order */
  bool oom = !x.a || !x.order || o.oom;
  ut_strmap_free(&x.locals);
  ut_arena_free(x.a);
  if (oom) {
    ut_str_free(&o);
    free(x.order);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  out->norm = ut_str_take(&o);
  out->len = strlen(out->norm);
  out->hash = ut_hash64(out->norm, out->len, 0x6b64656475700001ull);
  out->order = x.order;
  out->norder = x.norder;
  out->matchable = x.ok;
  return HARP_OK;
}

void cg_kform_free(cg_kform *k) {
  free(k->norm);
  free(k->order);
  memset(k, 0, sizeof *k);
}

bool cg_kform_same(const cg_kform *a, const cg_kform *b) {
  return a->matchable && b->matchable && a->hash == b->hash && a->len == b->len && a->norder == b->norder &&
         !memcmp(a->norm, b->norm, a->len);
}

/* #define fn_x to_x for every symbol fn_x the text of kernel fn names (it
 * defines the same ones the copy does, under the copy's prefix) */
void cg_kform_aliases(ut_str *out, const char *text, const char *fn, const char *to) {
  size_t fl = strlen(fn);
  ut_strmap seen = {0};
  ut_arena *a = ut_arena_new();
  for (const char *p = text; *p && a;) {
    if (!ident_start(*p) || (p > text && ident_char(p[-1]))) {
      p++;
      continue;
    }
    const char *s = p;
    while (ident_char(*p)) p++;
    size_t n = (size_t)(p - s);
    if (!is_own(s, n, fn, fl)) continue;
    char *key = ut_arena_strndup(a, s, n);
    if (!key || ut_strmap_find(&seen, key)) continue;
    if (!ut_strmap_put(&seen, key, 1)) {
      out->oom = true;
      break;
    }
    ut_str_printf(out, "#define %s %s%s\n", key, to, key + fl);
  }
  ut_strmap_free(&seen);
  ut_arena_free(a);
  if (!a) out->oom = true;
}
