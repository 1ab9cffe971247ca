/* ssa.c — Region Buffer SSA (seed 000 §1.5) as the JSON of §12.4, the
 * `--dump region` output (docs/regions.md).
 * Needs: a partition from rg_form (or any partition: regions without an
 * rg_info are dumped without their description).  Gives: rg_dump_json.
 *
 * Per region: its inputs and outputs as MemRefs {shape, strides, alignment,
 * noalias} — only outputs are materialized (`gmem`); the values computed
 * inside are `deferred`, never written — the body in value SSA (a `let` per
 * Tiny node, in the node's canonical JSON, then a `yield`), and what the
 * backends read: shape, blocks, epilogue, local_edges, halos, attention
 * operands, the plan summary, the default plan, the STOP reasons. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harp/region.h"
#include "util/util.h"

static json_t *jnum(double v) {
  if (isnan(v)) return json_string("nan");
  if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
  return json_real(v);
}

static json_t *memref(const tiny_node *n) {
  json_t *m = json_object(), *shape = json_array(), *strides = json_array();
  int64_t st[TINY_MAX_RANK], acc = 1;
  for (int d = n->shape.rank - 1; d >= 0; d--) st[d] = acc, acc *= n->shape.d[d].n > 0 ? n->shape.d[d].n : 1;
  for (int d = 0; d < n->shape.rank; d++) {
    json_array_append_new(shape, json_integer(n->shape.d[d].n));
    json_array_append_new(strides, json_integer(st[d]));
  }
  json_object_set_new(m, "shape", shape);
  json_object_set_new(m, "strides", strides);
  json_object_set_new(m, "dtype", json_string(tiny_dtype_name(n->dtype)));
  json_object_set_new(m, "alignment", json_integer(FN_ALIGN));
  json_object_set_new(m, "noalias", json_true());
  return m;
}

static json_t *ints(const int64_t *v, int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static json_t *operand(const tiny_graph *g, const poly_view *pv, const rg_operand *o) {
  json_t *j = json_object();
  json_object_set_new(j, "tensor", json_string(tiny_output_name(g, o->node)));
  json_object_set_new(j, "node", json_string(g->nodes[o->node].id));
  json_object_set_new(j, "in_block", json_string(poly_block(pv, o->block)->name));
  if (o->cast >= 0) {
    json_object_set_new(j, "cast", json_string(g->nodes[o->cast].id));
    json_object_set_new(j, "cast_to", json_string(tiny_dtype_name(g->nodes[o->cast].dtype)));
  }
  if (o->affine) {
    const poly_block_info *b = poly_block(pv, o->block);
    json_t *s = json_object();
    for (int v = 0; v < o->nvars && v < b->nvars; v++) json_object_set_new(s, b->var_names[v], json_integer(o->strides[v]));
    json_object_set_new(j, "strides", s);
    json_object_set_new(j, "offset", json_integer(o->offset));
  } else {
    json_object_set_new(j, "affine", json_false());
  }
  return j;
}

static json_t *plan_info(const plan_region_info *r) {
  json_t *j = json_object(), *axes = json_array();
  static const char *const roles[] = {"auto", "M", "N", "K", "batch"};
  json_object_set_new(j, "pattern", json_string(plan_pattern_name(r->pattern)));
  for (int i = 0; i < r->naxes; i++) {
    json_t *a = json_object();
    json_object_set_new(a, "name", json_string(r->axes[i].name));
    json_object_set_new(a, "size", json_integer(r->axes[i].size));
    json_object_set_new(a, "reduce", json_boolean(r->axes[i].reduce));
    json_object_set_new(a, "role", json_string(roles[r->axes[i].role]));
    json_array_append_new(axes, a);
  }
  json_object_set_new(j, "axes", axes);
  json_object_set_new(j, "in_dtype", json_string(tiny_dtype_name(r->in_dtype)));
  json_object_set_new(j, "acc_dtype", json_string(tiny_dtype_name(r->acc_dtype)));
  json_object_set_new(j, "out_dtype", json_string(tiny_dtype_name(r->out_dtype)));
  json_object_set_new(j, "flops", json_integer(r->flops));
  json_object_set_new(j, "bytes", json_integer(r->bytes));
  if (r->epilogue_known) {
    json_t *e = json_array();
    for (int i = 0; i < r->nepi; i++) json_array_append_new(e, json_string(plan_epi_name(r->epilogue[i])));
    json_object_set_new(j, "epilogue", e);
  }
  if (r->conv_kh) {
    int64_t w[2] = {r->conv_kh, r->conv_kw};
    json_object_set_new(j, "conv_window", ints(w, 2));
  }
  return j;
}

/* The region's blocks, each with its name, index, kind, node and role. */
static json_t *blocks_json(const tiny_graph *g, const poly_view *pv, const rg_info *I) {
  json_t *bl = json_array();
  for (int i = 0; i < I->nblocks; i++) {
    const poly_block_info *b = poly_block(pv, I->blocks[i]);
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(b->name));
    json_object_set_new(o, "index", json_integer(I->blocks[i]));
    json_object_set_new(o, "kind", json_string(poly_kind_name(b->kind)));
    json_object_set_new(o, "node", json_string(g->nodes[b->node].id));
    json_object_set_new(o, "role", json_string(rg_role_name(I->roles[i])));
    json_array_append_new(bl, o);
  }
  return bl;
}

/* The epilogue steps of I: block, op, role and the extra operands read. */
static json_t *epilogue_json(const tiny_graph *g, const poly_view *pv, const rg_info *I) {
  json_t *ep = json_array();
  for (int i = 0; i < I->nepi; i++) {
    const rg_epi *x = &I->epi[i];
    json_t *o = json_object(), *reads = json_array();
    json_object_set_new(o, "block", json_string(poly_block(pv, x->block)->name));
    json_object_set_new(o, "op", json_string(tiny_op_name(x->op)));
    json_object_set_new(o, "role", x->role >= 0 ? json_string(plan_epi_name((plan_epi)x->role)) : json_null());
    for (int k = 0; k < x->nextra; k++) json_array_append_new(reads, operand(g, pv, &x->extra[k]));
    json_object_set_new(o, "reads", reads);
    json_array_append_new(ep, o);
  }
  return ep;
}

/* The local edges of I (producer to consumer kept out of memory). */
static json_t *edges_json(const tiny_graph *g, const rg_info *I) {
  json_t *le = json_array();
  for (int i = 0; i < I->nedges; i++) {
    const rg_local_edge *x = &I->edges[i];
    json_t *o = json_object();
    json_object_set_new(o, "from", json_string(x->from));
    json_object_set_new(o, "to", json_string(x->to));
    json_object_set_new(o, "value", json_string(g->nodes[x->tensor].id));
    json_object_set_new(o, "buffer", json_string(plan_buffer_name(x->buffer)));
    if (x->depth) json_object_set_new(o, "depth", json_integer(x->depth));
    json_object_set_new(o, "bytes", json_integer(x->bytes));
    json_object_set_new(o, "barrier", json_string(poly_barrier_name(x->barrier)));
    json_array_append_new(le, o);
  }
  return le;
}

/* The halos of I: per consumer tile, the extent and reach of each axis. */
static json_t *halos_json(const tiny_graph *g, const poly_view *pv, const rg_info *I) {
  json_t *hs = json_array();
  for (int i = 0; i < I->nhalos; i++) {
    const rg_halo *h = &I->halos[i];
    const poly_block_info *b = poly_block(pv, h->block);
    json_t *o = json_object(), *tile = json_object(), *per = json_array();
    json_object_set_new(o, "tensor", json_string(tiny_output_name(g, h->tensor)));
    json_object_set_new(o, "consumer", json_string(b->name));
    for (int v = 0; v < b->nout; v++) json_object_set_new(tile, b->var_names[v], json_integer(h->tile[v]));
    json_object_set_new(o, "tile", tile);
    json_object_set_new(o, "ok", json_boolean(h->halo.ok));
    for (int d = 0; d < h->halo.rank; d++) {
      json_t *a = json_object();
      json_object_set_new(a, "axis", json_integer(d));
      json_object_set_new(a, "extent", json_integer(h->halo.extent[d]));
      json_object_set_new(a, "lo", json_integer(h->halo.lo[d]));
      json_object_set_new(a, "hi", json_integer(h->halo.hi[d]));
      json_array_append_new(per, a);
    }
    json_object_set_new(o, "per_axis", per);
    json_object_set_new(o, "bytes", json_integer(h->halo.bytes));
    json_object_set_new(o, "footprint_bytes", json_integer(h->halo.footprint_bytes));
    json_array_append_new(hs, o);
  }
  return hs;
}

/* The cell region's contractions and its rows x columns. */
static json_t *cell_json(const poly_view *pv, const rg_info *I) {
  json_t *o = json_object(), *cons = json_array();
  for (int k = 0; k < I->cell.ncon; k++) json_array_append_new(cons, json_string(poly_block(pv, I->cell.con[k])->name));
  json_object_set_new(o, "contractions", cons);
  json_object_set_new(o, "rows", json_integer(I->cell.M));
  json_object_set_new(o, "columns", json_integer(I->cell.H));
  return o;
}

/* The attention region a: its two contractions, operands, variables and
 * the softmax's options. */
static json_t *attention_json(const tiny_graph *g, const poly_view *pv, const rg_attention *a) {
  json_t *o = json_object();
  json_object_set_new(o, "algo", json_string("streaming_softmax_2pass"));
  json_object_set_new(o, "qk", json_string(poly_block(pv, a->qk)->name));
  json_object_set_new(o, "pv", json_string(poly_block(pv, a->pv)->name));
  json_object_set_new(o, "q", operand(g, pv, &a->q));
  json_object_set_new(o, "k", operand(g, pv, &a->k));
  json_object_set_new(o, "v", operand(g, pv, &a->v));
  const poly_block_info *qk = poly_block(pv, a->qk), *pvb = poly_block(pv, a->pv);
  json_object_set_new(o, "query_var", json_string(qk->var_names[a->q_var]));
  json_object_set_new(o, "key_var", json_string(qk->var_names[a->k_var]));
  json_object_set_new(o, "head_var", json_string(qk->var_names[a->d_var]));
  json_object_set_new(o, "value_var", json_string(pvb->var_names[a->dv_var]));
  json_object_set_new(o, "scale", jnum(a->scale));
  json_object_set_new(o, "mask", a->has_mask ? operand(g, pv, &a->mask) : json_null());
  json_object_set_new(o, "causal", json_boolean(a->causal));
  if (a->causal) {
    json_object_set_new(o, "causal_offset", json_integer(a->causal_offset));
    json_object_set_new(o, "where_mask", json_string(g->nodes[a->where_mask].id));
  }
  json_object_set_new(o, "exp", json_string(a->exp2 ? "exp2" : "exp"));
  if (a->has_max_floor) json_object_set_new(o, "max_floor", jnum(a->max_floor));
  if (a->has_sum_floor) json_object_set_new(o, "sum_floor", jnum(a->sum_floor));
  json_object_set_new(o, "p_dtype", json_string(tiny_dtype_name(a->p_dtype)));
  json_object_set_new(o, "out", json_string(g->nodes[a->out].id));
  json_object_set_new(o, "out_dtype", json_string(tiny_dtype_name(a->out_dtype)));
  return o;
}

/* The fusion stops recorded for I: candidate, reason, detail. */
static json_t *stops_json(const rg_info *I) {
  json_t *st = json_array();
  for (int i = 0; i < I->nstops; i++) {
    json_t *o = json_object();
    json_object_set_new(o, "candidate", json_string(I->stops[i].candidate));
    json_object_set_new(o, "reason", json_string(I->stops[i].reason));
    json_object_set_new(o, "detail", json_string(I->stops[i].detail));
    json_array_append_new(st, o);
  }
  return st;
}

/* The JSON of one formed region's info I over partition p (regions.json). */
static json_t *info_json(const rg_partition *p, const rg_info *I, harp_error *e) {
  const tiny_graph *g = p->g;
  const poly_view *pv = p->formed->pv;
  json_t *j = json_object();
  json_object_set_new(j, "shape", json_string(rg_shape_name(I->shape)));
  json_object_set_new(j, "selection", json_string(I->selection));
  json_object_set_new(j, "blocks", blocks_json(g, pv, I));
  if (I->shape != RG_SHAPE_GATHER) json_object_set_new(j, "prefix", json_integer(I->prefix));
  if (I->nepi) json_object_set_new(j, "epilogue", epilogue_json(g, pv, I));
  json_object_set_new(j, "local_edges", edges_json(g, I));
  if (I->nhalos) json_object_set_new(j, "halo", halos_json(g, pv, I));
  if (I->shape == RG_SHAPE_CELL) json_object_set_new(j, "cell", cell_json(pv, I));
  if (I->shape == RG_SHAPE_ATTENTION) json_object_set_new(j, "attention", attention_json(g, pv, &I->att));
  json_object_set_new(j, "plan_info", plan_info(&I->plan_info));
  if (I->has_plan) {
    char *pj = NULL;
    if (plan_to_json(&I->plan, &pj, e) == HARP_OK) {
      json_t *pl = json_loads(pj, 0, NULL);
      if (pl) json_object_set_new(j, "plan", pl);
    }
    free(pj);
  }
  json_object_set_new(j, "time_est", jnum(I->time_est));
  json_object_set_new(j, "dtime", jnum(I->dtime));
  json_object_set_new(j, "stops", stops_json(I));
  return j;
}

static bool is_value_of(const rg_region *R, int node) {
  for (int k = 0; k < R->nout; k++)
    if (R->out_values[k] == node) return true;
  return false;
}

harp_status rg_dump_json(harp_error *e, const rg_partition *p, char **out) {
  *out = NULL;
  const tiny_graph *g = p->g;
  char *canon = tiny_write_json(g);
  json_t *cj = canon ? json_loads(canon, 0, NULL) : NULL;
  free(canon);
  json_t *uops = cj ? json_object_get(cj, "uops") : NULL;
  if (!uops) {
    json_decref(cj);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  json_t *root = json_object(), *regions = json_array();
  for (int r = 0; r < p->n; r++) {
    const rg_region *R = &p->regions[r];
    json_t *j = json_object(), *ins = json_array(), *outs = json_array(), *body = json_array(), *locals = json_array();
    json_object_set_new(j, "name", json_string(R->name));
    json_object_set_new(j, "kind", json_string(R->kind));
    if (R->pattern) json_object_set_new(j, "pattern", json_string(R->pattern));
    json_object_set_new(j, "stop_reason", R->stop_reason ? json_string(R->stop_reason) : json_null());
    for (int k = 0; k < R->nin; k++) {
      json_t *o = json_object();
      json_object_set_new(o, "name", json_string(tiny_output_name(g, R->in_values[k])));
      json_object_set_new(o, "value", json_string(g->nodes[R->in_values[k]].id));
      json_object_set_new(o, "memref", memref(&g->nodes[R->in_values[k]]));
      json_array_append_new(ins, o);
    }
    for (int k = 0; k < R->nout; k++) {
      json_t *o = json_object();
      json_object_set_new(o, "name", json_string(tiny_output_name(g, R->out_values[k])));
      json_object_set_new(o, "value", json_string(g->nodes[R->out_values[k]].id));
      json_object_set_new(o, "memref", memref(&g->nodes[R->out_values[k]]));
      json_object_set_new(o, "materialize", json_string("gmem"));
      json_array_append_new(outs, o);
    }
    json_t *yield = json_array();
    for (int k = 0; k < R->nnodes; k++) {
      int n = R->nodes[k];
      json_t *u = json_array_get(uops, (size_t)n);
      const char *uid = u ? json_string_value(json_object_get(u, "id")) : NULL;
      if (!uid || strcmp(uid, g->nodes[n].id)) /* index and id agree in canonical JSON; search otherwise */
        for (size_t q = 0; q < json_array_size(uops); q++) {
          const char *x = json_string_value(json_object_get(json_array_get(uops, q), "id"));
          if (x && !strcmp(x, g->nodes[n].id)) u = json_array_get(uops, q);
        }
      u = json_deep_copy(u);
      json_t *let = json_object();
      if (u) json_object_del(u, "id");
      json_object_set_new(let, "let", json_string(g->nodes[n].id));
      json_object_set_new(let, "op", u ? u : json_null());
      json_object_set_new(let, "dtype", json_string(tiny_dtype_name(g->nodes[n].dtype)));
      tiny_class cls = tiny_op_class(g->nodes[n].op);
      if (cls != TC_MOVE && cls != TC_LEAF) {
        bool gm = is_value_of(R, n);
        json_object_set_new(let, "materialize", json_string(gm ? "gmem" : "deferred"));
        if (!gm) {
          json_t *l = json_object();
          json_object_set_new(l, "name", json_string(g->nodes[n].id));
          json_object_set_new(l, "materialize", json_string("deferred"));
          json_array_append_new(locals, l);
        }
      }
      json_array_append_new(body, let);
    }
    for (int k = 0; k < R->nout; k++) {
      char buf[512];
      snprintf(buf, sizeof buf, "%s -> %s", g->nodes[R->out_values[k]].id, tiny_output_name(g, R->out_values[k]));
      json_array_append_new(yield, json_string(buf));
    }
    json_t *y = json_object();
    json_object_set_new(y, "yield", yield);
    json_array_append_new(body, y);
    json_object_set_new(j, "inputs", ins);
    json_object_set_new(j, "outputs", outs);
    json_object_set_new(j, "locals", locals);
    json_object_set_new(j, "body", body);
    if (R->info && p->formed && p->formed->pv) json_object_update_missing_new(j, info_json(p, R->info, e));
    json_array_append_new(regions, j);
  }
  json_object_set_new(root, "regions", regions);
  if (p->formed) {
    const rg_formed *F = p->formed;
    json_t *s = json_object();
    json_object_set_new(s, "machine", json_string(F->machine.name));
    json_object_set_new(s, "arch", json_string(plan_arch_name(F->machine.arch)));
    json_object_set_new(s, "greedy_time", jnum(F->greedy_time));
    json_object_set_new(s, "final_time", jnum(F->final_time));
    json_object_set_new(s, "windows", json_integer(F->nwindows));
    json_object_set_new(s, "exact_wins", json_integer(F->nexact));
    json_object_set_new(root, "formation", s);
  }
  json_decref(cj);
  *out = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (!*out) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  return HARP_OK;
}
