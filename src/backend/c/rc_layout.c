/* rc_layout.c — a ShapeSet object's arena laid out per binding
 * (docs/architecture.md, "One object per ShapeSet").  The Function's
 * offsets (region/function.c's fn_place: best fit over a free list, the
 * kernels walked in order) are those of the upper corner; a small binding
 * run at them touches a few bytes of each large slot, its buffers spread
 * over the upper corner's arena (more cache sets, pages and 4K-aliased
 * streams than the exactly-specialised object, which packs them).  So the
 * object carries the same walk as data (each temporary's allocation and
 * release, in fn_place's order) and its sizes as expressions of the
 * symbols (rc_size_expr; a size no symbol moves is its constant, an upper
 * bound where a derived symbol stands behind it), and lays the arena out
 * again whenever a run's binding differs from the last one: at the upper
 * corner this gives fn_place's own offsets, at a smaller binding the
 * specialised object's packing.  Lifetimes do not depend on the binding
 * and every size is at least the binding's, so the layout is valid; one
 * that would end past the upper corner's arena (best fit is not monotone)
 * falls back to the upper corner's offsets.  The arena itself is the upper
 * corner's bytes, taken and every page of it touched at the instance's first
 * run, so a new binding later faults in no page: growing to each binding's
 * end gave every new largest binding a fresh arena, every page faulted again
 * (ResNet-18 at N = 8 after 3: 41 ms of system time in 2 MiB page faults on a
 * loaded Zen 5, bench/RESULTS.md "ssfig"), and only reserving the upper
 * corner still faulted the pages no binding had touched.  The price: the
 * upper corner's arena resident from the first run, as the specialised
 * object of the upper corner has it.  Where those bytes cannot be had it
 * grows to the binding's.
 * Needs: region_c.h (rc_ctx.gen_syms, rc_size_expr).
 * Gives: rc_emit_arena_at, rc_temp_ptr. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "region_c.h"

static size_t align64(size_t x) { return (x + FN_ALIGN - 1) / FN_ALIGN * FN_ALIGN; }

void rc_temp_ptr(const rc_ctx *c, int b, ut_str *o) {
  if (c->ngen_syms) ut_str_printf(o, "(void *)(m->arena + m->off[%d])", b);
  else ut_str_printf(o, "(void *)(m->arena + %zu)", c->f->buffers[b].offset);
}

/* fn_place's walk of f as events into ev (+(b + 1): temporary b
 * allocated, -(b + 1): released); returns their number (ev holds at least
 * 2 * nbuffers). */
static int layout_events(const fn_function *f, int *ev) {
  int n = 0;
  for (int r = 0; r < f->nkernels; r++) {
    const fn_kernel *K = &f->kernels[r];
    for (int k = 0; k < K->nwrites; k++)
      if (f->buffers[K->writes[k]].kind == FN_TEMP) ev[n++] = K->writes[k] + 1;
    for (int k = 0; k < K->nreads; k++)
      if (f->buffers[K->reads[k]].kind == FN_TEMP && f->buffers[K->reads[k]].last == r) ev[n++] = -(K->reads[k] + 1);
    for (int k = 0; k < K->nwrites; k++)
      if (f->buffers[K->writes[k]].kind == FN_TEMP && f->buffers[K->writes[k]].last == r) ev[n++] = -(K->writes[k] + 1);
  }
  return n;
}

/* P_sizes_(sz): each temporary's bytes at the binding hp_sym_ holds,
 * rounded up to FN_ALIGN (0 for the other buffers). */
static void emit_sizes(const rc_ctx *c, const char *P, ut_str *out) {
  const fn_function *f = c->f;
  ut_str_printf(out, "static void %s_sizes_(size_t *sz) {\n", P);
  for (int b = 0; b < f->nbuffers; b++) {
    const fn_buffer *B = &f->buffers[b];
    const tiny_node *n = &c->g->nodes[B->node];
    char e[512];
    size_t es = tiny_dtype_size(B->dtype);
    if (B->kind != FN_TEMP) ut_str_printf(out, "  sz[%d] = 0;\n", b);
    else if ((size_t)B->numel * es == B->size && rc_size_expr(c, &n->shape, 0, n->shape.rank, B->numel, e, sizeof e))
      ut_str_printf(out, "  sz[%d] = ((size_t)%s * %zuu + %du) / %du * %du;\n", b, e, es, FN_ALIGN - 1, FN_ALIGN, FN_ALIGN);
    else ut_str_printf(out, "  sz[%d] = %zuu;\n", b, align64(B->size ? B->size : 1));
  }
  ut_str_puts(out, "}\n\n");
}

/* P_place_: fn_place's best fit over the event list (ev, nev) at the sizes
 * sz: each temporary's offset into off, the arena's end returned. */
static void emit_place(const char *P, int nb, ut_str *out) {
  ut_str_printf(out,
                "/* fn_place's best fit (region/function.c): a free list sorted by offset, coalesced */\n"
                "static size_t %s_place_(const int *ev, int nev, const size_t *sz, size_t *off) {\n"
                "  size_t fo[%d], fs[%d], end = 0;\n  int n = 0;\n"
                "  for (int e = 0; e < nev; e++) {\n"
                "    int b = ev[e] > 0 ? ev[e] - 1 : -ev[e] - 1;\n    size_t s = sz[b] ? sz[b] : %du;\n"
                "    if (ev[e] > 0) {\n      int best = -1;\n"
                "      for (int i = 0; i < n; i++) if (fs[i] >= s && (best < 0 || fs[i] < fs[best])) best = i;\n"
                "      if (best >= 0) {\n        off[b] = fo[best], fo[best] += s, fs[best] -= s;\n"
                "        if (!fs[best]) { memmove(fo + best, fo + best + 1, sizeof *fo * (size_t)(n - best - 1));"
                " memmove(fs + best, fs + best + 1, sizeof *fs * (size_t)(n - best - 1)); n--; }\n"
                "      } else {\n        if (n && fo[n - 1] + fs[n - 1] == end) off[b] = fo[n - 1], n--;\n"
                "        else off[b] = end;\n        end = off[b] + s;\n      }\n      continue;\n    }\n"
                "    int i = 0;\n    while (i < n && fo[i] < off[b]) i++;\n"
                "    memmove(fo + i + 1, fo + i, sizeof *fo * (size_t)(n - i)); memmove(fs + i + 1, fs + i, sizeof *fs * (size_t)(n - i));\n"
                "    fo[i] = off[b], fs[i] = s, n++;\n"
                "    if (i + 1 < n && fo[i] + fs[i] == fo[i + 1]) { fs[i] += fs[i + 1];"
                " memmove(fo + i + 1, fo + i + 2, sizeof *fo * (size_t)(n - i - 2)); memmove(fs + i + 1, fs + i + 2, sizeof *fs * (size_t)(n - i - 2)); n--; }\n"
                "    if (i > 0 && fo[i - 1] + fs[i - 1] == fo[i]) { fs[i - 1] += fs[i];"
                " memmove(fo + i, fo + i + 1, sizeof *fo * (size_t)(n - i - 1)); memmove(fs + i, fs + i + 1, sizeof *fs * (size_t)(n - i - 1)); n--; }\n"
                "  }\n  return end;\n}\n\n",
                P, nb + 1, nb + 1, FN_ALIGN);
}

/* P_layout_(off): the layout at the binding hp_sym_ holds, its end
 * returned; the upper corner's where the walk would end past it. */
static void emit_layout(const rc_ctx *c, const char *P, ut_str *out) {
  const fn_function *f = c->f;
  int nb = f->nbuffers, *ev = ut_xcalloc(2 * (size_t)nb + 1, sizeof(int));
  int nev = ev ? layout_events(f, ev) : 0;
  ut_str_printf(out, "/* fn_place's walk: +(b + 1) temporary b allocated, -(b + 1) released */\n"
                     "static const int %s_ev_[%d] = {", P, nev + 1);
  for (int i = 0; i < nev; i++) ut_str_printf(out, "%s%d", i ? ", " : "", ev[i]);
  ut_str_printf(out, "%s};\n/* the upper corner's offsets (the Function's) */\nstatic const size_t %s_hi_off_[%d] = {", nev ? "" : "0", P,
                nb + 1);
  for (int b = 0; b < nb; b++) ut_str_printf(out, "%s%zuu", b ? ", " : "", f->buffers[b].kind == FN_TEMP ? f->buffers[b].offset : 0);
  ut_str_printf(out, "%s};\n\n", nb ? "" : "0");
  free(ev);
  emit_sizes(c, P, out);
  emit_place(P, nb, out);
  ut_str_printf(out,
                "/* the arena's layout at the binding hp_sym_ holds into off[], its bytes returned */\n"
                "static size_t %s_layout_(size_t *off) {\n  size_t sz[%d];\n  %s_sizes_(sz);\n"
                "  size_t end = %s_place_(%s_ev_, %d, sz, off);\n"
                "  if (end > %zuu) { memcpy(off, %s_hi_off_, sizeof %s_hi_off_[0] * %d); end = %zuu; }\n"
                "  return end;\n}\n\n",
                P, nb + 1, P, P, P, nev, f->required_memory, P, P, nb, f->required_memory);
}

void rc_emit_arena_at(const rc_ctx *c, const char *P, ut_str *out) {
  if (!c->ngen_syms) return;
  emit_layout(c, P, out);
  ut_str_printf(out,
                "/* the arena laid out for the binding hp_sym_ holds (again only when it differs from\n"
                " * the last run's); the first time, the arena made the upper corner's bytes, every\n"
                " * page touched (no binding faults one in later), else grown to the binding's\n"
                " * (its contents lost when it grows) */\n"
                "static int %s_grow_(%s_t *m) {\n  int same = m->lay_set;\n"
                "  for (int i = 0; i < %d; i++) same = same && m->lay_sym[i] == hp_sym_[i];\n"
                "  if (!same) {\n    m->lay_end = %s_layout_(m->off);\n"
                "    for (int i = 0; i < %d; i++) m->lay_sym[i] = hp_sym_[i];\n    m->lay_set = 1;\n  }\n"
                "  size_t need = m->lay_end, hi = %zuu;\n  if (need <= m->arena_cap) return 0;\n"
                "  unsigned char *a = hprt_alloc((hi + 63) / 64 * 64 + 64, NULL);\n"
                "  if (a) for (size_t i = 0; i < hi; i += 4096) a[i] = 0; /* its pages faulted in now, none at a later binding */\n"
                "  if (a) need = hi;\n  else if (!(a = hprt_alloc((need + 63) / 64 * 64 + 64, NULL))) return 1;\n"
                "  free(m->arena);\n  m->arena = a, m->arena_cap = need;\n  return 0;\n}\n\n"
                "/* the arena's bytes at the binding syms[0..%s_num_syms()) */\n"
                "size_t %s_required_memory_syms(const long long *syms) {\n  long keep[%d];\n  size_t off[%d];\n"
                "  for (int i = 0; i < %d; i++) keep[i] = hp_sym_[i], hp_sym_[i] = (long)syms[i];\n"
                "  size_t need = %s_layout_(off);\n  for (int i = 0; i < %d; i++) hp_sym_[i] = keep[i];\n  return need;\n}\n\n",
                P, P, c->ngen_syms, P, c->ngen_syms, c->f->required_memory, P, P, c->ngen_syms, c->f->nbuffers + 1,
                c->ngen_syms, P, c->ngen_syms);
}

/* The fields of P_t the layout keeps (emit_model.c prints them). */
void rc_emit_layout_fields(const rc_ctx *c, ut_str *out) {
  if (!c->ngen_syms) return;
  ut_str_printf(out,
                "  size_t arena_cap; /* the arena's bytes (a ShapeSet object's: the upper corner's from its first run) */\n"
                "  size_t off[%d]; /* each temporary's offset at the binding lay_sym (P_grow_) */\n"
                "  long lay_sym[%d]; size_t lay_end; int lay_set;\n",
                c->f->nbuffers + 1, c->ngen_syms);
}
