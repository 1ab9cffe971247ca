/* astgen_sym.c — a ShapeSet object's loop nests: statement domains and
 * accesses over the symbols' parameters instead of this graph's sizes
 * (docs/architecture.md, "One object per ShapeSet").
 *
 * The graph is prepared at one binding, so every block's domain is a box of
 * numbers.  Where an axis's size is a ShapeSet symbol (its IndexBook size
 * is named after it and has its value here), the statement loops over
 * 0 <= v < hp_sv<i> instead, hp_sv<i> an isl parameter in
 * 1..poly_ast_opts.sym_hi[i]; an access that is one affine function f is
 * rebuilt on that domain (a padded read with one pad value: its real
 * elements are the points where f lies in the read tensor's box, each
 * symbolic axis bounded by its parameter; behind a PAD, the box of the PAD's
 * input, the access composed that far; a pad before an axis that is a
 * symbol shifts the guard and the read by lo_now - hp_sv<i>).  Every such set and map is
 * checked against the graph's own at sym_now; where one differs, or cannot
 * be built, the caller keeps the numbers (the ShapeSet's corner check then
 * compiles per binding).
 * Needs: poly_int.h (blocks, accesses), indexbook.h (ib_compose),
 * harp/poly_ast.h (the options).
 * Gives: poly_sym_params, poly_sym_domain, poly_sym_access, poly_sym_equal_now. */
#include <stdio.h>
#include <string.h>

#include <isl/aff.h>

#include "harp/poly_ast.h"
#include "poly/poly_int.h"
#include "util/util.h"

/* "[hp_sv0, .., hp_sv<n-1>] -> " */
static void params_text(ut_str *s, const poly_ast_opts *o) {
  ut_str_putc(s, '[');
  for (int i = 0; i < o->nsyms; i++) ut_str_printf(s, "%shp_sv%d", i ? ", " : "", i);
  ut_str_puts(s, "] -> ");
}

/* The symbol whose value the size n named `sym` is, or -1. */
static int sym_of(const poly_ast_opts *o, const char *sym, int64_t n) {
  for (int i = 0; sym && i < o->nsyms; i++)
    if (!strcmp(sym, o->syms[i]) && o->sym_now[i] == n) return i;
  return -1;
}

__isl_give isl_set *poly_sym_params(isl_ctx *ctx, const poly_ast_opts *o, bool now) {
  ut_str s;
  ut_str_init(&s);
  params_text(&s, o);
  ut_str_puts(&s, "{ : ");
  for (int i = 0; i < o->nsyms; i++) {
    if (now) ut_str_printf(&s, "%shp_sv%d = %lld", i ? " and " : "", i, (long long)o->sym_now[i]);
    else ut_str_printf(&s, "%s1 <= hp_sv%d <= %lld", i ? " and " : "", i, (long long)o->sym_hi[i]);
  }
  ut_str_puts(&s, " }");
  isl_set *r = s.oom ? NULL : isl_set_read_from_str(ctx, s.buf);
  ut_str_free(&s);
  return r;
}

bool poly_sym_equal_now(isl_ctx *ctx, const poly_ast_opts *o, __isl_take isl_map *a, __isl_take isl_map *b) {
  isl_set *now = poly_sym_params(ctx, o, true);
  a = isl_map_align_params(a, isl_set_get_space(now));
  b = isl_map_align_params(b, isl_set_get_space(now));
  a = isl_map_intersect_params(a, isl_set_copy(now));
  b = isl_map_intersect_params(b, now);
  isl_bool eq = isl_map_is_equal(a, b);
  isl_map_free(a);
  isl_map_free(b);
  return eq == isl_bool_true;
}

__isl_give isl_set *poly_sym_domain(poly_view *pv, const poly_blk *b, int nvars, const poly_ast_opts *o,
                                    const char *tuple, __isl_keep isl_set *concrete) {
  if (!o->nsyms || !(b->is_box || b->ranges_known)) return NULL; /* a box by isl's ranges: checked below */
  const ib_info *f = ib_get(pv->ib, b->var_node);
  ut_str s;
  ut_str_init(&s);
  params_text(&s, o);
  ut_str_printf(&s, "{ %s[", tuple);
  for (int v = 0; v < nvars; v++) ut_str_printf(&s, "%sv%d", v ? ", " : "", v);
  ut_str_puts(&s, "] : ");
  bool any = false;
  for (int v = 0; v < nvars; v++) {
    int i = b->lo[v] == 0 ? sym_of(o, f->axes[v].size.sym, b->hi[v] + 1) : -1;
    if (i >= 0) ut_str_printf(&s, "%s0 <= v%d < hp_sv%d", v ? " and " : "", v, i);
    else ut_str_printf(&s, "%s%lld <= v%d <= %lld", v ? " and " : "", (long long)b->lo[v], v, (long long)b->hi[v]);
    any |= i >= 0;
  }
  ut_str_puts(&s, " }");
  isl_set *d = any && !s.oom ? isl_set_read_from_str(pv->ctx, s.buf) : NULL;
  ut_str_free(&s);
  if (d && !poly_sym_equal_now(pv->ctx, o, isl_map_from_range(isl_set_copy(d)), isl_map_from_range(isl_set_copy(concrete)))) {
    isl_set_free(d);
    d = NULL;
  }
  if (!d) isl_ctx_reset_error(pv->ctx);
  return d;
}

static isl_stat take_piece(__isl_take isl_set *set, __isl_take isl_multi_aff *ma, void *user) {
  isl_set_free(set);
  isl_multi_aff **out = user;
  isl_multi_aff_free(*out);
  *out = ma;
  return isl_stat_ok;
}

/* The box of tensor node t over params: each axis of a symbol's size below
 * its parameter, the others below their sizes; in space sp (taken). */
static __isl_give isl_set *tensor_box(poly_view *pv, const poly_ast_opts *o, int t, __isl_take isl_space *sp) {
  const tiny_shape *sh = &pv->g->nodes[t].shape;
  ut_str s;
  ut_str_init(&s);
  params_text(&s, o);
  ut_str_puts(&s, "{ [");
  for (int d = 0; d < sh->rank; d++) ut_str_printf(&s, "%so%d", d ? ", " : "", d);
  ut_str_puts(&s, "] : ");
  for (int d = 0; d < sh->rank; d++) {
    int i = sym_of(o, sh->d[d].sym, sh->d[d].n);
    if (i >= 0) ut_str_printf(&s, "%s0 <= o%d < hp_sv%d", d ? " and " : "", d, i);
    else ut_str_printf(&s, "%s0 <= o%d < %lld", d ? " and " : "", d, (long long)sh->d[d].n);
  }
  ut_str_puts(&s, " }");
  isl_set *box = s.oom || isl_space_dim(sp, isl_dim_set) != sh->rank ? NULL : isl_set_read_from_str(pv->ctx, s.buf);
  ut_str_free(&s);
  if (box && isl_space_has_tuple_id(sp, isl_dim_set) == isl_bool_true)
    box = isl_set_set_tuple_id(box, isl_space_get_tuple_id(sp, isl_dim_set));
  isl_space_free(sp);
  return box;
}

/* Access a of block b (one of b's own node's reads) as far as the input of
 * the one PAD it passes: the node's step map composed through the views up
 * to the PAD's input, into *out.  False where a passes no PAD or several,
 * is not b's node's own read, or a step does not compose. */
static bool to_pad_input(poly_view *pv, const poly_blk *b, const poly_acc *a, ib_access *out, int *pad_node) {
  const tiny_graph *g = pv->g;
  int pad = -1;
  for (int i = 0; i < a->ib.nvia; i++) {
    if (g->nodes[a->ib.via[i]].op != TINY_PAD) continue;
    if (pad >= 0) return false;
    pad = a->ib.via[i];
  }
  if (pad < 0) return false;
  const ib_info *f = ib_get(pv->ib, b->var_node);
  int k = 0;
  while (k < f->nin && !(f->acc[k].via == a->ib.via && f->acc[k].src == a->ib.src)) k++;
  if (k == f->nin || f->nvars != b->pub.nvars) return false;
  harp_error e = {0};
  ib_env env;
  ib_env_for(pv->ib, b->var_node, &e, &env);
  ib_access cur = f->in[k];
  const int in = g->nodes[pad].src[0].node;
  for (int step = 0; cur.src != in; step++) {
    if (step > a->ib.nvia || cur.non_affine || !ib_is_movement(pv->ib, cur.src)) return false;
    if (ib_compose(pv->ib, &env, &cur, &ib_get(pv->ib, cur.src)->in[0], &cur)) return false;
  }
  *out = cur;
  *pad_node = pad;
  return !cur.non_affine;
}

/* The shift of PAD node pad's input indices where a pad before an axis is a
 * ShapeSet symbol (a Concat's later piece, after 2 H): [i] -> [i + lo_now -
 * hp_sv<k>] (the graph's access holds lo_now), in space sp (taken); NULL
 * when no pad before an axis is a symbol (*none true) or on failure. */
static __isl_give isl_map *pad_shift(poly_view *pv, const poly_ast_opts *o, int pad, __isl_take isl_space *sp, bool *none) {
  const tiny_node *n = &pv->g->nodes[pad];
  ut_str s;
  ut_str_init(&s);
  params_text(&s, o);
  ut_str_puts(&s, "{ [");
  for (int d = 0; d < n->a.pad.n; d++) ut_str_printf(&s, "%so%d", d ? ", " : "", d);
  ut_str_puts(&s, "] -> [");
  *none = true;
  for (int d = 0; d < n->a.pad.n; d++) {
    int i = -1;
    for (int k = 0; n->a.pad.lo[d].sym && k < o->nsyms; k++)
      if (!strcmp(n->a.pad.lo[d].sym, o->syms[k])) i = k;
    if (i >= 0) ut_str_printf(&s, "%so%d + %lld - hp_sv%d", d ? ", " : "", d, (long long)o->sym_now[i], i), *none = false;
    else ut_str_printf(&s, "%so%d", d ? ", " : "", d);
  }
  ut_str_puts(&s, "] }");
  isl_map *m = *none || s.oom || isl_space_dim(sp, isl_dim_set) != n->a.pad.n ? NULL : isl_map_read_from_str(pv->ctx, s.buf);
  ut_str_free(&s);
  isl_space_free(sp);
  return m;
}

/* Where padded access a of block b reads a real element, over the symbols:
 * the points whose index into the PAD's input (one affine function, the
 * access's one read piece) lies in that input's box (tensor_box), in the
 * space of map r's domain; NULL where to_pad_input cannot tell.  The
 * composed access's own guard reads the base (a CONST behind an EXPAND, say),
 * whose box knows no symbol. */
static __isl_give isl_set *pad_guard(poly_view *pv, const poly_blk *b, const poly_acc *a, const poly_ast_opts *o,
                                     __isl_keep isl_map *r, isl_map **shift) {
  *shift = NULL;
  ib_access q;
  int pad;
  if (isl_map_dim(r, isl_dim_in) != b->pub.nvars || !to_pad_input(pv, b, a, &q, &pad)) return NULL;
  const ib_piece *read = NULL;
  for (int i = 0; i < q.npieces; i++) {
    if (q.pieces[i].fill) continue;
    if (read) return NULL;
    read = &q.pieces[i];
  }
  if (!read) return NULL;
  isl_space *dom = poly_block_space(pv, b);
  isl_local_space *ls = isl_local_space_from_space(isl_space_copy(dom));
  isl_aff_list *list = isl_aff_list_alloc(pv->ctx, read->nmap);
  for (int k = 0; k < read->nmap; k++) list = isl_aff_list_add(list, poly_aff(pv, ls, &read->map[k]));
  isl_local_space_free(ls);
  isl_space *ran = isl_space_add_dims(isl_space_params(isl_space_copy(dom)), isl_dim_set, (unsigned)read->nmap);
  isl_multi_aff *f = isl_multi_aff_from_aff_list(isl_space_map_from_domain_and_range(dom, isl_space_copy(ran)), list);
  bool none;
  isl_map *sh = pad_shift(pv, o, pad, isl_space_copy(ran), &none);
  if (!none && (!sh || q.src != a->ib.src)) { /* the source behind the PAD's input: its indices not shifted here */
    isl_map_free(sh);
    isl_space_free(ran);
    isl_multi_aff_free(f);
    return NULL;
  }
  isl_set *box = tensor_box(pv, o, q.src, ran);
  if (sh && box) { /* the input's box seen from the graph's indices: i + lo_now - hp_sv in it */
    box = isl_set_align_params(box, isl_map_get_space(sh));
    sh = isl_map_align_params(sh, isl_set_get_space(box));
    box = isl_set_preimage_pw_multi_aff(box, isl_pw_multi_aff_from_map(isl_map_copy(sh)));
  }
  *shift = sh;
  if (!box || !f) {
    isl_set_free(box);
    isl_multi_aff_free(f);
    return NULL;
  }
  f = isl_multi_aff_align_params(f, isl_set_get_space(box));
  box = isl_set_align_params(box, isl_multi_aff_get_space(f));
  isl_set *guard = isl_set_preimage_multi_aff(box, f);
  guard = isl_set_reset_tuple_id(guard);
  if (isl_map_has_tuple_name(r, isl_dim_in) == isl_bool_true)
    guard = isl_set_set_tuple_name(guard, isl_map_get_tuple_name(r, isl_dim_in));
  return isl_set_align_params(guard, isl_map_get_space(r));
}

__isl_give isl_map *poly_sym_access(poly_view *pv, const poly_blk *b, const poly_acc *a, const poly_ast_opts *o,
                                    __isl_take isl_map *m, __isl_keep isl_set *pdom, __isl_keep isl_set *cdom) {
  if (a->nfill > 1) {
    isl_map_free(m);
    return NULL;
  }
  isl_map *want = isl_map_intersect_domain(isl_map_copy(m), isl_set_copy(cdom));
  isl_pw_multi_aff *pma = isl_pw_multi_aff_coalesce(isl_pw_multi_aff_from_map(isl_map_coalesce(m)));
  isl_multi_aff *ma = NULL;
  if (pma && isl_pw_multi_aff_n_piece(pma) == 1) isl_pw_multi_aff_foreach_piece(pma, take_piece, &ma);
  isl_pw_multi_aff_free(pma);
  isl_map *r = ma ? isl_map_from_multi_aff(ma) : NULL;
  if (r) {
    r = isl_map_align_params(r, isl_set_get_space(pdom));
    r = isl_map_intersect_domain(r, isl_set_copy(pdom));
  }
  isl_map *shift = NULL;
  isl_set *guard = r && a->nfill == 1 ? pad_guard(pv, b, a, o, r, &shift) : NULL;
  if (guard) {
    r = isl_map_intersect_domain(r, guard);
    if (shift && isl_map_has_tuple_id(r, isl_dim_out) == isl_bool_true) {
      shift = isl_map_set_tuple_id(shift, isl_dim_in, isl_map_get_tuple_id(r, isl_dim_out));
      shift = isl_map_set_tuple_id(shift, isl_dim_out, isl_map_get_tuple_id(r, isl_dim_out));
    }
    if (shift) r = isl_map_apply_range(isl_map_align_params(r, isl_map_get_space(shift)), shift), shift = NULL;
  } else if (r && a->nfill == 1) {
    isl_ctx_reset_error(pv->ctx);
    isl_set *box = tensor_box(pv, o, a->ib.src, isl_space_range(isl_map_get_space(r)));
    box = box ? isl_set_align_params(box, isl_map_get_space(r)) : NULL;
    r = box ? isl_map_intersect_range(r, box) : isl_map_free(r);
  }
  isl_map_free(shift);
  if (r && !poly_sym_equal_now(pv->ctx, o, isl_map_copy(r), isl_map_copy(want))) r = isl_map_free(r);
  isl_map_free(want);
  if (!r) isl_ctx_reset_error(pv->ctx);
  return r;
}
