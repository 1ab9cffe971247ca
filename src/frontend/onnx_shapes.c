/* onnx_shapes.c — the shapes of an ONNX model's graph inputs: the concrete
 * shapes and symbol values given at import (onnx_opts.shapes and .syms),
 * dynamic dims as shape variables, and the error for a node that needs a
 * symbolic size as a number, which names the graph input the size depends
 * on and the option that gives its shape.
 *
 * A dim is dynamic when it is a dim_param ("batch": one shape variable for
 * every dim that names it), or written -1, "?", "" or not at all (a
 * variable of its own, "<input>_d<i>").  A dim written 0 is a static 0
 * unless a shape is given for the input.  There is no default value: a
 * dynamic dim that no option binds stays a symbol (onnx_model.dyn).
 *
 * Needs: onnx_load.c (the context, names, errors).
 * Gives: ox_bind_given, ox_input_dims, ox_dyn_list, ox_need_value,
 * ox_known, onnx_parse_shape. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* What dim d of a declared shape is: a value (D_FIXED, *v), a dim_param
 * (D_PARAM, *param), or anonymous (-1, "?", "", no value). */
ox_dim_kind ox_kind_of(const Onnx__TensorShapeProto__Dimension *d, int64_t *v, const char **param) {
  *v = -1, *param = NULL;
  if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
    *v = d->dim_value;
    return d->dim_value >= 0 ? D_FIXED : D_ANON;
  }
  if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param && *d->dim_param &&
      strcmp(d->dim_param, "?") != 0) {
    *param = d->dim_param;
    return D_PARAM;
  }
  return D_ANON;
}
static const Onnx__TensorShapeProto *declared_shape(const Onnx__ValueInfoProto *vi) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) return NULL;
  return tp->tensor_type->shape;
}

/* The shape given for graph input `name` (by its ONNX name or its harp
 * identifier) and taken by ox_bind_given: its index in opts->shapes, or -1. */
static int given_shape(const ox_ctx *c, const char *name) {
  if (!c->opts || !c->taken) return -1;
  char id[128];
  ox_sanitize(name, id);
  for (int k = 0; k < c->opts->nshapes; k++)
    if (c->taken[k] && (!strcmp(c->opts->shapes[k].name, name) || !strcmp(c->opts->shapes[k].name, id))) return k;
  return -1;
}

/* A value given for a shape symbol by opts->syms (by its harp name). */
static bool given_sym(const ox_ctx *c, const char *name, int64_t *v) {
  char id[128];
  ox_sanitize(name, id);
  return c->opts && c->opts->syms && tiny_symtab_get(c->opts->syms, id, v);
}

/* The opts->keep_dynamic entry that names dim i of graph input name (harp
 * id id; its dim_param param, or NULL): its dim_param as spelled or as an
 * identifier, "<id>_d<i>", or "INPUT:i" (by ONNX name or id); -1: none. */
static int kept_dynamic(const ox_ctx *c, const char *name, const char *id, int i, const char *param) {
  const onnx_opts *o = c->opts;
  for (int k = 0; o && k < o->nkeep_dynamic; k++) {
    const char *x = o->keep_dynamic[k];
    char buf[300], pid[128];
    if (param) {
      ox_sanitize(param, pid);
      if (!strcmp(x, param) || !strcmp(x, pid)) return k;
    }
    snprintf(buf, sizeof buf, "%s_d%d", id, i);
    if (!strcmp(x, buf)) return k;
    snprintf(buf, sizeof buf, "%s:%d", name, i);
    if (!strcmp(x, buf)) return k;
    snprintf(buf, sizeof buf, "%s:%d", id, i);
    if (!strcmp(x, buf)) return k;
  }
  return -1;
}

/* Record that dim_param `param` is v (as `from` says); a different value
 * recorded before is InputMismatch. */
static harp_status bind_param(ox_ctx *c, const char *param, int64_t v, const char *from) {
  char nm[96];
  ox_printable(param, nm, sizeof nm);
  if (v < 0 || v > OX_MAX_DIM) return ox_fail(c, HARP_E_INPUT_MISMATCH, "%s gives dim \"%s\" the size %" PRId64 " (must be in [0, 2^31))", from, nm, v);
  int *have = ut_strmap_find(&c->bound, param);
  if (have && *have != v)
    return ox_fail(c, HARP_E_INPUT_MISMATCH, "the shapes given disagree on dim \"%s\": %d, and %" PRId64 " from %s", nm, *have, v, from);
  if (!ut_strmap_put(&c->bound, param, (int)v)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  return HARP_OK;
}

/* Why shape gs does not fit graph input vi's declared dims (rank, static
 * dims, dim_params bound before), in msg with its code; HARP_OK when it fits. */
static harp_status misfit(ox_ctx *c, const Onnx__ValueInfoProto *vi, const onnx_shape *gs, char *msg, size_t cap) {
  char nm[96];
  ox_printable(vi->name, nm, sizeof nm);
  const Onnx__TensorShapeProto *sp = declared_shape(vi);
  if (gs->rank < 0 || gs->rank > TINY_MAX_RANK)
    return snprintf(msg, cap, "the shape given for graph input \"%s\" has rank %d (at most %d)", nm, gs->rank, TINY_MAX_RANK), HARP_E_LIMIT;
  if (!sp) return HARP_OK; /* no declared shape: the given one is the shape */
  for (size_t i = 0; i < sp->n_dim; i++) {
    int64_t v;
    const char *param;
    if (ox_kind_of(sp->dim[i], &v, &param) == D_FIXED && v > OX_MAX_DIM)
      return snprintf(msg, cap, "graph input \"%s\": dim %zu is %" PRId64 " (must be in [0, 2^31))", nm, i, v), HARP_E_LIMIT;
  }
  if ((int)sp->n_dim != gs->rank)
    return snprintf(msg, cap, "graph input \"%s\" has rank %zu; the shape given for it has rank %d", nm, sp->n_dim, gs->rank),
           HARP_E_INPUT_MISMATCH;
  for (int i = 0; i < gs->rank; i++) {
    int64_t v;
    const char *param;
    ox_dim_kind k = ox_kind_of(sp->dim[i], &v, &param);
    int *b = k == D_PARAM ? ut_strmap_find(&c->bound, param) : NULL;
    if (k == D_FIXED && v != 0 && v != gs->dims[i])
      return snprintf(msg, cap, "graph input \"%s\": dim %d is %" PRId64 " in the model; the shape given for it has %" PRId64, nm, i, v,
                      gs->dims[i]), HARP_E_INPUT_MISMATCH;
    if (b && *b != gs->dims[i]) {
      char pn[96];
      ox_printable(param, pn, sizeof pn);
      return snprintf(msg, cap, "the shapes given disagree on dim \"%s\": %d, and %" PRId64 " for graph input \"%s\"", pn, *b,
                      gs->dims[i], nm), HARP_E_INPUT_MISMATCH;
    }
  }
  return HARP_OK;
}

/* Whether graph input vi declares a dynamic dim (or no shape). */
static bool has_dynamic(const Onnx__ValueInfoProto *vi) {
  const Onnx__TensorShapeProto *sp = declared_shape(vi);
  for (size_t i = 0; sp && i < sp->n_dim; i++) {
    int64_t v;
    const char *param;
    if (ox_kind_of(sp->dim[i], &v, &param) != D_FIXED) return true;
  }
  return !sp;
}

/* Take shape k for graph input vi: check it, bind the dim_params it covers. */
static harp_status take(ox_ctx *c, const Onnx__ValueInfoProto *vi, int k) {
  const onnx_shape *gs = &c->opts->shapes[k];
  char msg[400];
  harp_status code = misfit(c, vi, gs, msg, sizeof msg);
  if (code) return ox_fail(c, code, "%s", msg);
  c->taken[k] = true;
  if (c->opts->shape_used) c->opts->shape_used[k] = true;
  const Onnx__TensorShapeProto *sp = declared_shape(vi);
  char nm[96], from[160];
  ox_printable(vi->name, nm, sizeof nm);
  snprintf(from, sizeof from, "the shape of graph input \"%s\"", nm);
  char id[128];
  ox_sanitize(vi->name, id);
  for (int i = 0; sp && i < gs->rank; i++) {
    int64_t v;
    const char *param;
    if (ox_kind_of(sp->dim[i], &v, &param) == D_PARAM && kept_dynamic(c, vi->name, id, i, param) < 0 &&
        bind_param(c, param, gs->dims[i], from))
      return c->e->code;
  }
  return HARP_OK;
}

/* The shapes given for graph input vi: the first that fits is taken (a
 * loose one that does not fit a fully static input is left out, for the
 * data's binding to report); another one must agree. */
static harp_status given_for(ox_ctx *c, const Onnx__ValueInfoProto *vi) {
  const onnx_opts *o = c->opts;
  char id[128];
  ox_sanitize(vi->name, id);
  int first = -1;
  for (int k = 0; k < o->nshapes; k++) {
    const onnx_shape *gs = &o->shapes[k];
    if (strcmp(gs->name, vi->name) != 0 && strcmp(gs->name, id) != 0) continue;
    bool same = first >= 0 && gs->rank == o->shapes[first].rank &&
                !memcmp(gs->dims, o->shapes[first].dims, sizeof *gs->dims * (size_t)(gs->rank > 0 ? gs->rank : 0));
    if (first >= 0 && !same && !gs->loose) {
      char nm[96];
      ox_printable(vi->name, nm, sizeof nm);
      return ox_fail(c, HARP_E_INPUT_MISMATCH, "two different shapes are given for graph input \"%s\"", nm);
    }
    if (same && o->shape_used) o->shape_used[k] = true;
    char msg[400];
    if (first >= 0 || (gs->loose && misfit(c, vi, gs, msg, sizeof msg) && !has_dynamic(vi))) continue;
    if (take(c, vi, k)) return c->e->code;
    first = k;
  }
  return HARP_OK;
}

harp_status ox_bind_given(ox_ctx *c, const Onnx__GraphProto *gp) {
  const onnx_opts *o = c->opts;
  for (int k = 0; o && o->shape_used && k < o->nshapes; k++) o->shape_used[k] = false;
  if (!o || (!o->nshapes && !o->syms)) return HARP_OK;
  if (!(c->taken = ut_xcalloc((size_t)o->nshapes + 1, sizeof *c->taken))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  ut_strmap inits = {0};
  harp_status st = HARP_OK;
  for (size_t i = 0; i < gp->n_initializer && !st; i++)
    if (gp->initializer[i]->name && !ut_strmap_put(&inits, gp->initializer[i]->name, 1)) st = ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (size_t i = 0; i < gp->n_input && !st; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (!vi->name || !*vi->name || ut_strmap_find(&inits, vi->name)) continue;
    st = given_for(c, vi);
    /* symbols given by name: the dim_params of this input's dims */
    const Onnx__TensorShapeProto *sp = declared_shape(vi);
    for (size_t d = 0; sp && d < sp->n_dim && !st && o->syms; d++) {
      int64_t v, sv;
      const char *param;
      char id[128];
      ox_sanitize(vi->name, id);
      if (ox_kind_of(sp->dim[d], &v, &param) == D_PARAM && kept_dynamic(c, vi->name, id, (int)d, param) < 0 &&
          given_sym(c, param, &sv))
        st = bind_param(c, param, sv, "--sym");
    }
  }
  ut_strmap_free(&inits);
  return st;
}

/* The shape variable of dim_param `param` (one per distinct dim_param),
 * registered with its name the first time. */
static const char *param_sym(ox_ctx *c, const char *param) {
  int *have = ut_strmap_find(&c->dimsyms, param);
  if (have) return c->m->names[*have].id;
  const char *sym = ox_ident(c, param);
  if (!sym || ox_add_name(c, param, sym)) return NULL;
  if (!ut_strmap_put(&c->dimsyms, param, c->m->nnames - 1)) {
    ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    return NULL;
  }
  return sym;
}

/* Dim i of graph input vi (its harp name id): its value in *v (true), or
 * its shape variable in *sym and dim_param in *param (false); NULL *sym
 * with an error set on failure. */
static bool one_dim(ox_ctx *c, const Onnx__TensorShapeProto__Dimension *d, const char *id, int i, int64_t *v, const char **sym,
                    const char **param) {
  *sym = NULL;
  ox_dim_kind k = ox_kind_of(d, v, param);
  if (k == D_FIXED) return true;
  int *b = k == D_PARAM ? ut_strmap_find(&c->bound, *param) : NULL;
  if (b) {
    *v = *b;
    return true;
  }
  if (k == D_PARAM) {
    *sym = param_sym(c, *param);
    return false;
  }
  char buf[160];
  snprintf(buf, sizeof buf, "%s_d%d", id, i);
  if (kept_dynamic(c, id, id, i, NULL) < 0 && given_sym(c, buf, v)) return true;
  *sym = ox_ident(c, buf);
  return false;
}

static harp_status add_gin(ox_ctx *c, const char *name, int rank, ox_gin **out) {
  if (c->ngins == c->gincap) {
    int cap = c->gincap ? 2 * c->gincap : 8;
    ox_gin *p = ut_xrealloc(c->gins, sizeof *p * (size_t)cap);
    if (!p) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    c->gins = p, c->gincap = cap;
  }
  *out = &c->gins[c->ngins++];
  memset(*out, 0, sizeof **out);
  (*out)->name = name;
  (*out)->rank = rank;
  return HARP_OK;
}

harp_status ox_input_dims(ox_ctx *c, const Onnx__ValueInfoProto *vi, const char *id, int *rank, tiny_dim *dims) {
  char nm[96];
  ox_printable(vi->name, nm, sizeof nm);
  const Onnx__TensorShapeProto *sp = declared_shape(vi);
  int k = given_shape(c, vi->name);
  const onnx_shape *gs = k >= 0 ? &c->opts->shapes[k] : NULL;
  if (!sp && !gs)
    return ox_fail(c, HARP_E_UNSUPPORTED, "graph input \"%s\" declares no shape (harp needs at least its rank): give it at import: %s %s=1x...",
                   nm, c->opts && c->opts->shape_option ? c->opts->shape_option : "--shape", nm);
  int r = gs ? gs->rank : (int)sp->n_dim;
  if (r > TINY_MAX_RANK) return ox_fail(c, HARP_E_LIMIT, "graph input \"%s\" has rank %d (at most %d)", nm, r, TINY_MAX_RANK);
  ox_gin *g = NULL;
  if (add_gin(c, vi->name, r, &g)) return c->e->code;
  int64_t numel = 1;
  for (int i = 0; i < r; i++) {
    int64_t v = gs ? gs->dims[i] : -1;
    const char *sym = NULL, *param = NULL;
    bool keep = false; /* a dim the shape gives that stays a symbol (keep_dynamic) */
    int kk = -1;       /* its keep_dynamic entry */
    if (gs && sp && c->opts->nkeep_dynamic) {
      int64_t dv;
      keep = ox_kind_of(sp->dim[i], &dv, &param) != D_FIXED && (kk = kept_dynamic(c, vi->name, id, i, param)) >= 0;
    }
    if ((!gs || keep) && !one_dim(c, sp->dim[i], id, i, &v, &sym, &param)) {
      if (!sym) return c->e->code ? c->e->code : ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
      dims[i] = tiny_dim_sym(sym);
      g->d[i] = fe_dim_sym(c->A, sym);
      g->param[i] = param;
      if (!g->d[i]) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
      if (!keep && c->opts && c->opts->nkeep_dynamic) kk = kept_dynamic(c, vi->name, id, i, param); /* no shape given */
      if (kk >= 0 && c->opts->keep_dynamic_hi && c->opts->keep_dynamic_hi[kk] > 0 && !ut_strmap_find(&c->sym_hi, sym) &&
          !ut_strmap_put(&c->sym_hi, sym, kk))
        return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
      continue;
    }
    if (v < 0 || v > OX_MAX_DIM) return ox_fail(c, HARP_E_LIMIT, "graph input \"%s\": dim %d is %" PRId64 " (must be in [0, 2^31))", nm, i, v);
    int64_t dv;
    const char *pp;
    if (sp && i < (int)sp->n_dim && ox_kind_of(sp->dim[i], &dv, &pp) != D_FIXED) g->given[i] = true, g->param[i] = pp;
    if (v && numel > OX_MAX_NUMEL / v) return ox_fail(c, HARP_E_LIMIT, "graph input \"%s\" has more than 2^34 elements", nm);
    numel *= v;
    dims[i] = tiny_dim_int(v);
    if (!(g->d[i] = fe_dim_int(c->A, v))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  }
  *rank = r;
  return HARP_OK;
}

void ox_shape_hint(const char *option, const char *name, int rank, const int64_t *dims, const char *const *params, char *buf, size_t cap) {
  char nm[96];
  ox_printable(name, nm, sizeof nm);
  int k = snprintf(buf, cap, "%s %s=", option ? option : "--shape", nm);
  for (int i = 0; i < rank && k > 0 && (size_t)k < cap; i++) {
    char pn[64];
    if (params[i]) ox_printable(params[i], pn, sizeof pn);
    if (dims[i] >= 0) k += snprintf(buf + k, cap - (size_t)k, "%s%" PRId64, i ? "x" : "", dims[i]);
    else k += snprintf(buf + k, cap - (size_t)k, "%s<%s>", i ? "x" : "", params[i] ? pn : "?");
  }
}

/* The option that gives graph input g's shape, its static dims filled in. */
static void hint_of(const ox_ctx *c, const ox_gin *g, char *buf, size_t cap) {
  int64_t dims[TINY_MAX_RANK];
  for (int i = 0; i < g->rank; i++)
    if (!fe_dim_is_int(g->d[i], &dims[i])) dims[i] = -1;
  ox_shape_hint(c->opts ? c->opts->shape_option : NULL, g->name, g->rank, dims, g->param, buf, cap);
}

/* The graph input and dim that shape variable sym stands for; NULL if none. */
static const ox_gin *origin(const ox_ctx *c, const char *sym, int *dim) {
  for (int k = 0; k < c->ngins; k++)
    for (int i = 0; i < c->gins[k].rank; i++) {
      const char *s = fe_dim_is_sym(c->gins[k].d[i]);
      if (s && !strcmp(s, sym)) {
        *dim = i;
        return &c->gins[k];
      }
    }
  return NULL;
}

typedef struct sym_list {
  const char *s[8];
  int n;
} sym_list;

static void collect_sym(void *ctx, const char *sym) {
  sym_list *l = ctx;
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->s[i], sym)) return;
  if (l->n < 8) l->s[l->n++] = sym;
}

harp_status ox_need_value(ox_ctx *c, const fe_dim *d, const char *what) {
  sym_list l = {.n = 0};
  fe_dim_syms(d, collect_sym, &l);
  char deps[320] = "", hints[640] = "";
  size_t kd = 0, kh = 0;
  const ox_gin *seen[8];
  int nseen = 0;
  for (int i = 0; i < l.n; i++) {
    int dim;
    const ox_gin *g = origin(c, l.s[i], &dim);
    if (!g) continue;
    char nm[96];
    ox_printable(g->name, nm, sizeof nm);
    if (kd < sizeof deps)
      kd += (size_t)snprintf(deps + kd, sizeof deps - kd, "%sdim %d of graph input \"%s\"", kd ? ", " : "", dim, nm);
    bool dup = false;
    for (int j = 0; j < nseen; j++) dup |= seen[j] == g;
    if (dup) continue;
    seen[nseen++] = g;
    char h[256];
    hint_of(c, g, h, sizeof h);
    if (kh < sizeof hints) kh += (size_t)snprintf(hints + kh, sizeof hints - kh, "%s%s", kh ? " " : "", h);
  }
  if (!nseen) return ox_fail(c, HARP_E_UNBOUND_SYMBOL, "%s is %s, which harp needs as a number at import", what, d->text);
  return ox_fail(c, HARP_E_UNBOUND_SYMBOL, "%s is %s, which harp needs as a number at import; it depends on %s (dynamic): give %s: %s",
                 what, d->text, deps, nseen > 1 ? "their shapes" : "its shape", hints);
}

/* The graph input (not an initializer or a constant) whose value is v, or NULL. */
static const ox_val *input_of(const ox_ctx *c, hg_val v) {
  for (int i = 0; i < c->nvals; i++) {
    const ox_val *x = &c->vals[i];
    if (x->v == v && !x->is_init && !x->has_i && !x->has_t) return x;
  }
  return NULL;
}

void ox_needs_data(ox_ctx *c, const ox_val *x) {
  if (c->opts && c->opts->needs_data) ox_needs_data_cb(c, x, c->opts->needs_data, c->opts->needs_ctx);
}

void ox_needs_data_cb(ox_ctx *c, const ox_val *x, void (*cb)(void *ctx, const char *name), void *cb_ctx) {
  if (!x || x->v <= 0 || !cb) return;
  int n = c->g->n;
  bool *seen = ut_xcalloc((size_t)n + 2, sizeof *seen);
  hg_val *stack = ut_xmalloc(sizeof *stack * ((size_t)n + 2));
  int top = 0;
  if (seen && stack) stack[top++] = x->v, seen[x->v] = true;
  while (top > 0) { /* the INPUT leaves x is computed from */
    hg_val v = stack[--top];
    const fe_node *nd = fe_node_of(c->g, v);
    if (!nd) continue;
    const ox_val *in = nd->op == HG_OP_INPUT ? input_of(c, v) : NULL;
    if (in) cb(cb_ctx, in->name);
    for (int k = 0; k < nd->nin; k++)
      if (nd->in[k] > 0 && nd->in[k] <= n && !seen[nd->in[k]]) seen[nd->in[k]] = true, stack[top++] = nd->in[k];
  }
  free(seen);
  free(stack);
}

harp_status ox_known(ox_ctx *c, const fe_dim *d, const char *what, int64_t *out) {
  if (fe_dim_is_int(d, out)) return HARP_OK;
  return ox_need_value(c, d, what);
}

static char *dup_str(const char *s) {
  char *p = ut_xmalloc(strlen(s) + 1);
  if (p) strcpy(p, s);
  return p;
}

/* m->bound: the graph inputs' dims the file leaves dynamic that the options gave values (once). */
static harp_status bound_list(ox_ctx *c) {
  onnx_model *m = c->m;
  int n = 0;
  for (int k = 0; k < c->ngins; k++)
    for (int i = 0; i < c->gins[k].rank; i++) n += c->gins[k].given[i] && fe_dim_is_int(c->gins[k].d[i], &(int64_t){0});
  if (!n || m->bound) return HARP_OK;
  if (!(m->bound = ut_xcalloc((size_t)n, sizeof *m->bound))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int k = 0; k < c->ngins; k++)
    for (int i = 0; i < c->gins[k].rank; i++) {
      const ox_gin *g = &c->gins[k];
      int64_t v;
      if (!g->given[i] || !fe_dim_is_int(g->d[i], &v)) continue;
      onnx_bound *y = &m->bound[m->nbound++];
      y->dim = i, y->value = v;
      y->input = dup_str(g->name), y->param = g->param[i] ? dup_str(g->param[i]) : NULL;
      if (!y->input || (g->param[i] && !y->param)) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    }
  return HARP_OK;
}

harp_status ox_dyn_list(ox_ctx *c) {
  onnx_model *m = c->m;
  if (bound_list(c)) return c->e->code;
  int n = 0;
  for (int k = 0; k < c->ngins; k++)
    for (int i = 0; i < c->gins[k].rank; i++) n += fe_dim_is_sym(c->gins[k].d[i]) != NULL;
  if (!n) return HARP_OK;
  if (!(m->dyn = ut_xcalloc((size_t)n, sizeof *m->dyn))) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
  for (int k = 0; k < c->ngins; k++) {
    const ox_gin *g = &c->gins[k];
    char hint[256];
    hint_of(c, g, hint, sizeof hint);
    for (int i = 0; i < g->rank; i++) {
      const char *sym = fe_dim_is_sym(g->d[i]);
      if (!sym) continue;
      onnx_dyn *y = &m->dyn[m->ndyn++];
      y->dim = i;
      y->input = dup_str(g->name), y->sym = dup_str(sym), y->hint = dup_str(hint);
      if (!y->input || !y->sym || !y->hint) return ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
    }
  }
  return HARP_OK;
}

const char *onnx_dyn_sym(const onnx_model *m, const char *name) {
  const char *colon = strrchr(name, ':');
  char *end = NULL;
  long axis = colon ? strtol(colon + 1, &end, 10) : -1;
  size_t n = colon ? (size_t)(colon - name) : 0;
  for (int i = 0; colon && end != colon + 1 && !*end && i < m->ndyn; i++) { /* INPUT:AXIS, by its ONNX name or harp id */
    const char *in = m->dyn[i].input, *id = onnx_id_of(m, in);
    bool same = (strlen(in) == n && !strncmp(in, name, n)) || (id && strlen(id) == n && !strncmp(id, name, n));
    if (same && m->dyn[i].dim == axis) return m->dyn[i].sym;
  }
  for (int i = 0; i < m->ndyn; i++)
    if (!strcmp(m->dyn[i].sym, name)) return m->dyn[i].sym;
  for (int i = 0; i < m->nnames; i++) /* a dim_param as the file spells it: its variable's identifier */
    for (int k = 0; !strcmp(m->names[i].onnx, name) && k < m->ndyn; k++)
      if (!strcmp(m->names[i].id, m->dyn[k].sym)) return m->dyn[k].sym;
  return NULL;
}

harp_status onnx_require_shapes_but(harp_error *e, const onnx_model *m, const char *const *syms, int nsyms) {
  onnx_model left = *m;
  left.dyn = ut_xcalloc((size_t)m->ndyn + 1, sizeof *left.dyn);
  if (!left.dyn) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  left.ndyn = 0;
  for (int i = 0; i < m->ndyn; i++) {
    bool given = false;
    for (int k = 0; k < nsyms && !given; k++) given = syms[k] && !strcmp(syms[k], m->dyn[i].sym);
    if (!given) left.dyn[left.ndyn++] = m->dyn[i];
  }
  harp_status st = onnx_require_shapes(e, &left);
  free(left.dyn);
  return st;
}

harp_status onnx_require_shapes(harp_error *e, const onnx_model *m) {
  if (!m->ndyn) return HARP_OK;
  char msg[900];
  int k = snprintf(msg, sizeof msg, "the model has dynamic dims that no shape or symbol given binds (harp needs every size):");
  for (int i = 0; i < m->ndyn && k > 0 && (size_t)k < sizeof msg; i++) {
    if (i && !strcmp(m->dyn[i].input, m->dyn[i - 1].input)) continue; /* one entry per input */
    char nm[96];
    ox_printable(m->dyn[i].input, nm, sizeof nm);
    k += snprintf(msg + k, sizeof msg - (size_t)k, "%s graph input \"%s\" (dim %d", i ? ";" : "", nm, m->dyn[i].dim);
    for (int j = i + 1; j < m->ndyn && !strcmp(m->dyn[j].input, m->dyn[i].input) && (size_t)k < sizeof msg; j++)
      k += snprintf(msg + k, sizeof msg - (size_t)k, ", %d", m->dyn[j].dim);
    if ((size_t)k < sizeof msg) k += snprintf(msg + k, sizeof msg - (size_t)k, "): give %s", m->dyn[i].hint);
  }
  return ut_fail(e, HARP_E_UNBOUND_SYMBOL, NULL, "%s", msg);
}

harp_status onnx_parse_shape(harp_error *e, const char *spec, onnx_shape *out) {
  memset(out, 0, sizeof *out);
  const char *eq = spec ? strrchr(spec, '=') : NULL;
  if (!eq || eq == spec) return ut_fail(e, HARP_E_USAGE, NULL, "--shape expects NAME=DIMS (e.g. x=1x3x224x224), got '%s'", spec ? spec : "");
  if ((size_t)(eq - spec) >= sizeof out->name) return ut_fail(e, HARP_E_USAGE, NULL, "--shape: the name is longer than %d characters", ONNX_NAME_MAX - 1);
  memcpy(out->name, spec, (size_t)(eq - spec));
  const char *p = eq + 1;
  while (*p) {
    if (out->rank == TINY_MAX_RANK) return ut_fail(e, HARP_E_USAGE, NULL, "--shape %s: more than %d dims", spec, TINY_MAX_RANK);
    char *end;
    long long v = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : -1;
    if (v < 0 || end == p || v > OX_MAX_DIM || (*end && *end != 'x' && *end != ',') || (*end && !end[1]))
      return ut_fail(e, HARP_E_USAGE, NULL, "--shape %s: the dims must be integers in [0, 2^31) separated by 'x' (e.g. x=1x3x224x224)", spec);
    out->dims[out->rank++] = v;
    p = *end ? end + 1 : end;
  }
  return HARP_OK;
}
