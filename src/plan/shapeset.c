/* shapeset.c — ShapeSets (seed 000 §6, §8; design.md §2.3): shape bindings
 * clustered into classes, so that a plan tuned for one binding serves the
 * bindings near it.
 * Needs: the Tiny IR (which symbols a graph names).  Gives:
 * plan_shapeset_class, plan_shapeset_key, plan_binding_text.
 *
 * The class of a size v is v itself for v <= 1 and otherwise the smallest
 * power of two >= v: 2, 3..4, 5..8, ..., 513..1024, 1025..2048.  Within a
 * class the kernels' tiles keep their proportions to the problem (at most a
 * factor 2 apart), which is what a tuned plan depends on; tails differ and
 * are re-derived when a cached plan is applied (plan_retarget). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_int.h"
#include "util/util.h"

int64_t plan_shapeset_class(int64_t v) {
  if (v <= 1) return v;
  int64_t c = 1;
  while (c < v && c <= INT64_MAX / 2) c *= 2;
  return c < v ? v : c;
}

static void mark_dim(const tiny_dim *d, const tiny_symtab *syms, bool *used) {
  if (!d->sym) return;
  for (int i = 0; i < syms->n; i++)
    if (!strcmp(syms->names[i], d->sym)) used[i] = true;
}

static void mark_shape(const tiny_shape *s, const tiny_symtab *syms, bool *used) {
  for (int d = 0; d < s->rank && d < TINY_MAX_RANK; d++) mark_dim(&s->d[d], syms, used);
}

/* Every symbol a shape or a size argument of g names. */
static void mark_graph(const tiny_graph *g, const tiny_symtab *syms, bool *used) {
  for (int i = 0; i < g->n; i++) {
    const tiny_node *n = &g->nodes[i];
    mark_shape(&n->shape, syms, used);
    switch (tiny_op_argkind(n->op)) { /* the sizes its arg names */
    case TA_INPUT: mark_shape(&n->a.input.shape, syms, used); break;
    case TA_RESHAPE: mark_shape(&n->a.reshape.shape, syms, used); break;
    case TA_EXPAND: mark_shape(&n->a.expand.shape, syms, used); break;
    case TA_VIEW: mark_shape(&n->a.view.shape, syms, used); break;
    case TA_PAD:
      for (int d = 0; d < n->a.pad.n && d < TINY_MAX_RANK; d++)
        mark_dim(&n->a.pad.lo[d], syms, used), mark_dim(&n->a.pad.hi[d], syms, used);
      break;
    case TA_SHRINK:
      for (int d = 0; d < n->a.shrink.n && d < TINY_MAX_RANK; d++) {
        mark_dim(&n->a.shrink.lo[d], syms, used), mark_dim(&n->a.shrink.hi[d], syms, used);
        if (n->a.shrink.has_step) mark_dim(&n->a.shrink.step[d], syms, used);
      }
      break;
    case TA_POOL:
      for (int d = 0; d < n->a.pool.n && d < TINY_MAX_RANK; d++) {
        mark_dim(&n->a.pool.kernel[d], syms, used), mark_dim(&n->a.pool.stride[d], syms, used);
        mark_dim(&n->a.pool.dilation[d], syms, used);
      }
      break;
    case TA_REDUCE:
      for (int d = 0; d < n->a.reduce.n && d < TINY_MAX_RANK; d++) mark_dim(&n->a.reduce.axes[d], syms, used);
      break;
    default: break;
    }
  }
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void binding_key(const tiny_symtab *syms, const tiny_graph *g, bool classes, char *out, size_t cap) {
  if (!out || cap == 0) return;
  out[0] = 0;
  int n = syms ? syms->n : 0;
  bool *used = n ? ut_xcalloc((size_t)n, sizeof *used) : NULL;
  const char **names = n ? ut_xcalloc((size_t)n, sizeof *names) : NULL;
  if (n && (!used || !names)) { /* out of memory: a key that matches nothing cached */
    free(used);
    free(names);
    snprintf(out, cap, "?");
    return;
  }
  if (g) mark_graph(g, syms, used);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!g || used[i]) names[k++] = syms->names[i];
  if (k > 1) qsort(names, (size_t)k, sizeof *names, by_name);
  ut_str s;
  ut_str_init(&s);
  for (int i = 0; i < k; i++) {
    int64_t v = 0;
    tiny_symtab_get(syms, names[i], &v);
    char safe[PLAN_NAME_MAX];
    ut_sanitize_name(names[i], safe, sizeof safe);
    if (classes) ut_str_printf(&s, "%s%s:%lld", i ? ";" : "", safe, (long long)plan_shapeset_class(v));
    else ut_str_printf(&s, "%s%s=%lld", i ? ";" : "", safe, (long long)v);
  }
  const char *text = s.buf && s.len ? s.buf : "static";
  size_t len = strlen(text);
  if (s.oom) {
    snprintf(out, cap, "?");
  } else if (len < cap) {
    memcpy(out, text, len + 1);
  } else if (cap > 24) {
    /* keep whole symbols that fit, then a hash of the full key */
    size_t keep = cap - 20;
    while (keep > 0 && text[keep] != ';') keep--;
    snprintf(out, cap, "%.*s;#%016llx", (int)keep, text, (unsigned long long)ut_hash64(text, len, 0x5e75ull));
  } else {
    snprintf(out, cap, "#%016llx", (unsigned long long)ut_hash64(text, len, 0x5e75ull));
  }
  ut_str_free(&s);
  free(used);
  free(names);
}

void plan_shapeset_key(const tiny_symtab *syms, const tiny_graph *g, char *out, size_t cap) {
  binding_key(syms, g, true, out, cap);
}

void plan_binding_text(const tiny_symtab *syms, const tiny_graph *g, char *out, size_t cap) {
  binding_key(syms, g, false, out, cap);
}
