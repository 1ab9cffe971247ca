/* graph.c — frontend programs and graphs: storage, values, shape variables,
 * parameters, outputs, the sticky error.
 * Needs: dim.c.  Gives: hg_program_* / hg_graph_* / hg_shape_var /
 * hg_output / hg_name and the node allocation the op builders use. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_int.h"

static const struct {
  const char *name;
  hg_op_class cls;
} op_table[] = {
#define HG_X_OP(e, l, n, c) {n, c},
    HG_OPS(HG_X_OP)
#undef HG_X_OP
};

const char *hg_op_name(hg_op op) { return (unsigned)op < HG_OP_COUNT ? op_table[op].name : "?"; }
hg_op_class hg_op_class_of(hg_op op) { return (unsigned)op < HG_OP_COUNT ? op_table[op].cls : HG_C_OTHER; }

bool fe_is_ident(const char *s) {
  if (!s || !*s || strlen(s) > 120) return false;
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
  for (const char *p = s + 1; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return true;
}

/* ---- programs -------------------------------------------------------------- */
hg_program *hg_program_new(void) {
  hg_program *p = ut_xcalloc(1, sizeof *p);
  if (!p) return NULL;
  p->arena = ut_arena_new();
  if (!p->arena) {
    free(p);
    return NULL;
  }
  return p;
}

static void graph_free(hg_graph *g) {
  if (!g) return;
  free(g->nodes);
  free(g->sv);
  free(g->params);
  free(g->outs);
  free(g);
}

void hg_program_free(hg_program *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) graph_free(p->graphs[i]);
  free(p->graphs);
  ut_arena_free(p->arena);
  free(p);
}

const harp_error *hg_program_error(const hg_program *p) { return &p->err; }

hg_graph *hg_program_find(const hg_program *p, const char *name) {
  for (int i = 0; p && name && i < p->n; i++)
    if (strcmp(p->graphs[i]->name, name) == 0) return p->graphs[i];
  return NULL;
}

int hg_program_ngraphs(const hg_program *p) { return p ? p->n : 0; }
hg_graph *hg_program_graph_at(const hg_program *p, int i) { return p && i >= 0 && i < p->n ? p->graphs[i] : NULL; }

hg_graph *hg_program_add_graph(hg_program *p, const char *name) {
  if (!p) return NULL;
  if (!fe_is_ident(name)) {
    ut_fail(&p->err, HARP_E_INVALID_ARG, name, "graph name \"%s\" is not an identifier", name ? name : "");
    return NULL;
  }
  if (hg_program_find(p, name)) {
    ut_fail(&p->err, HARP_E_DUPLICATE_ID, name, "graph \"%s\" is defined twice", name);
    return NULL;
  }
  if (p->n == p->cap) {
    int cap = p->cap ? p->cap * 2 : 8;
    hg_graph **gs = ut_xrealloc(p->graphs, sizeof *gs * (size_t)cap);
    if (!gs) goto oom;
    p->graphs = gs;
    p->cap = cap;
  }
  hg_graph *g = ut_xcalloc(1, sizeof *g);
  if (!g) goto oom;
  g->prog = p;
  g->name = ut_arena_strdup(p->arena, name);
  if (!g->name) {
    free(g);
    goto oom;
  }
  p->graphs[p->n++] = g;
  return g;
oom:
  ut_fail(&p->err, HARP_E_NO_MEMORY, name, "out of memory");
  return NULL;
}

hg_graph *hg_graph_new(void) {
  hg_program *p = hg_program_new();
  if (!p) return NULL;
  hg_graph *g = hg_program_add_graph(p, "main");
  if (!g) {
    hg_program_free(p);
    return NULL;
  }
  g->owns_program = true;
  return g;
}

void hg_graph_free(hg_graph *g) {
  if (g && g->owns_program) hg_program_free(g->prog);
}

hg_program *hg_graph_program(const hg_graph *g) { return g ? g->prog : NULL; }
const char *hg_graph_name(const hg_graph *g) { return g ? g->name : NULL; }
const harp_error *hg_graph_error(const hg_graph *g) { return &g->err; }

/* ---- errors ------------------------------------------------------------------ */
hg_val fe_failv(hg_graph *g, harp_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ut_vfail(&g->err, code, NULL, fmt, ap);
  va_end(ap);
  return -1;
}

void fe_clear_error(hg_graph *g) { harp_error_clear(&g->err); }

const char *fe_strdup(hg_graph *g, const char *s) {
  const char *r = ut_arena_strdup(g->prog->arena, s);
  if (!r && s) fe_failv(g, HARP_E_NO_MEMORY, "out of memory");
  return r;
}

/* ---- nodes ------------------------------------------------------------------- */
fe_node *fe_node_of(const hg_graph *g, hg_val v) {
  if (!g || v < 1 || v > g->n) return NULL;
  return &g->nodes[v - 1];
}

hg_val fe_val_of(const hg_graph *g, const fe_node *n) { return (hg_val)(n - g->nodes) + 1; }

fe_node *fe_new_node(hg_graph *g, hg_op op, const hg_val *in, int nin) {
  if (g->err.code != HARP_OK) return NULL;
  for (int i = 0; i < nin; i++)
    if (in[i] != HG_NONE && !fe_node_of(g, in[i])) {
      fe_failv(g, in[i] < 0 ? HARP_E_INVALID_ARG : HARP_E_DANGLING, "%s: operand %d is not a value of graph %s",
               hg_op_name(op), i + 1, g->name);
      return NULL;
    }
  if (g->n >= TINY_MAX_NODES) {
    fe_failv(g, HARP_E_LIMIT, "graph %s has too many nodes", g->name);
    return NULL;
  }
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 32;
    fe_node *nn = ut_xrealloc(g->nodes, sizeof *nn * (size_t)cap);
    if (!nn) {
      fe_failv(g, HARP_E_NO_MEMORY, "out of memory");
      return NULL;
    }
    g->nodes = nn;
    g->cap = cap;
  }
  hg_val *ins = NULL;
  if (nin > 0) {
    ins = ut_arena_alloc(g->prog->arena, sizeof *ins * (size_t)nin);
    if (!ins) {
      fe_failv(g, HARP_E_NO_MEMORY, "out of memory");
      return NULL;
    }
    memcpy(ins, in, sizeof *ins * (size_t)nin);
  }
  fe_node *n = &g->nodes[g->n++];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->nin = nin;
  n->in = ins;
  n->line = g->line;
  n->col = g->col;
  return n;
}

hg_val hg_name(hg_graph *g, hg_val v, const char *name) {
  fe_node *n = fe_node_of(g, v);
  if (!g || g->err.code) return -1;
  if (!n) return fe_failv(g, HARP_E_INVALID_ARG, "hg_name: not a value");
  if (name && !fe_is_ident(name)) return fe_failv(g, HARP_E_INVALID_ARG, "\"%s\" is not an identifier", name);
  n->name = name ? fe_strdup(g, name) : NULL;
  return g->err.code ? -1 : v;
}

tiny_dtype hg_val_dtype(const hg_graph *g, hg_val v) {
  const fe_node *n = fe_node_of(g, v);
  return n ? n->dtype : TINY_FP32;
}

int hg_val_rank(const hg_graph *g, hg_val v) {
  const fe_node *n = fe_node_of(g, v);
  return n ? n->shape.rank : -1;
}

bool hg_val_dim_text(const hg_graph *g, hg_val v, int i, char *buf, int cap) {
  const fe_node *n = fe_node_of(g, v);
  if (!n || i < 0 || i >= n->shape.rank || cap < 1) return false;
  snprintf(buf, (size_t)cap, "%s", n->shape.d[i]->text);
  return true;
}

void fe_shape_text(const fe_shape *s, char *buf, int cap) {
  int k = snprintf(buf, (size_t)cap, "[");
  for (int i = 0; i < s->rank && k < cap; i++) k += snprintf(buf + k, (size_t)(cap - k), "%s%s", i ? ", " : "", s->d[i]->text);
  if (k < cap) snprintf(buf + k, (size_t)(cap - k), "]");
}

/* ---- shape variables ---------------------------------------------------------- */
int fe_shape_var_index(const hg_graph *g, const char *name) {
  for (int i = 0; i < g->nsv; i++)
    if (strcmp(g->sv[i].name, name) == 0) return i;
  return -1;
}

harp_status hg_shape_var(hg_graph *g, const char *name, int64_t dflt) {
  if (g->err.code) return g->err.code;
  if (!fe_is_ident(name)) return fe_failv(g, HARP_E_INVALID_ARG, "shape variable \"%s\" is not an identifier", name ? name : ""), g->err.code;
  if (dflt > TINY_MAX_DIM)
    return fe_failv(g, HARP_E_LIMIT, "default %" PRId64 " of shape variable %s is above 2^40", dflt, name), g->err.code;
  int k = fe_shape_var_index(g, name);
  if (k >= 0) {
    if (g->sv[k].dflt < 0) {
      g->sv[k].dflt = dflt; /* declared implicitly by a parameter before */
      return HARP_OK;
    }
    return fe_failv(g, HARP_E_DUPLICATE_ID, "shape variable %s is declared twice", name), g->err.code;
  }
  if (g->nsv == g->svcap) {
    int cap = g->svcap ? g->svcap * 2 : 8;
    fe_shape_var *s = ut_xrealloc(g->sv, sizeof *s * (size_t)cap);
    if (!s) return fe_failv(g, HARP_E_NO_MEMORY, "out of memory"), g->err.code;
    g->sv = s;
    g->svcap = cap;
  }
  fe_shape_var *v = &g->sv[g->nsv];
  memset(v, 0, sizeof *v);
  v->name = fe_strdup(g, name);
  if (!v->name) return g->err.code;
  v->dflt = dflt < 0 ? -1 : dflt;
  v->line = g->line;
  v->col = g->col;
  g->nsv++;
  return HARP_OK;
}

/* ---- outputs ------------------------------------------------------------------ */
int fe_output_index(const hg_graph *g, const char *name) {
  for (int i = 0; i < g->nout; i++)
    if (strcmp(g->outs[i].name, name) == 0) return i;
  return -1;
}

static fe_output *new_output(hg_graph *g, const char *name) {
  if (!fe_is_ident(name)) {
    fe_failv(g, HARP_E_INVALID_ARG, "output name \"%s\" is not an identifier", name ? name : "");
    return NULL;
  }
  if (fe_output_index(g, name) >= 0) {
    fe_failv(g, HARP_E_DUPLICATE_ID, "output %s is declared twice", name);
    return NULL;
  }
  if (g->nout == g->ocap) {
    int cap = g->ocap ? g->ocap * 2 : 4;
    fe_output *o = ut_xrealloc(g->outs, sizeof *o * (size_t)cap);
    if (!o) {
      fe_failv(g, HARP_E_NO_MEMORY, "out of memory");
      return NULL;
    }
    g->outs = o;
    g->ocap = cap;
  }
  fe_output *o = &g->outs[g->nout];
  memset(o, 0, sizeof *o);
  o->name = fe_strdup(g, name);
  if (!o->name) return NULL;
  o->line = g->line;
  o->col = g->col;
  g->nout++;
  return o;
}

harp_status fe_declare_output(hg_graph *g, const char *name, tiny_dtype dt, const fe_shape *s) {
  if (g->err.code) return g->err.code;
  fe_output *o = new_output(g, name);
  if (!o) return g->err.code;
  o->dtype = dt;
  o->shape = *s;
  return HARP_OK;
}

hg_val fe_set_output(hg_graph *g, int k, hg_val v) {
  if (g->err.code) return -1;
  const fe_node *n = fe_operand(g, v, "output");
  if (!n) return -1;
  fe_output *o = &g->outs[k];
  if (n->op == HG_OP_CALL) return fe_failv(g, HARP_E_INVALID_ARG, "output %s: a call is not a value", o->name);
  if (!n->weak && n->dtype != o->dtype)
    return fe_failv(g, HARP_E_DTYPE_MISMATCH, "output %s is declared %s but the value is %s", o->name,
                    tiny_dtype_name(o->dtype), tiny_dtype_name(n->dtype));
  char a[256], b[256];
  fe_shape_text(&o->shape, a, sizeof a);
  fe_shape_text(&n->shape, b, sizeof b);
  if (n->shape.rank != o->shape.rank)
    return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "output %s is declared %s but the value has shape %s", o->name, a, b);
  for (int i = 0; i < o->shape.rank; i++)
    if (fe_dim_cmp(o->shape.d[i], n->shape.d[i]) == FE_DIFF)
      return fe_failv(g, HARP_E_AXIS_SIZE_MISMATCH, "output %s is declared %s but the value has shape %s", o->name, a,
                      b);
  if (n->weak && o->dtype != TINY_FP32 && o->dtype != TINY_FP16 && o->dtype != TINY_BF16)
    return fe_failv(g, HARP_E_DTYPE_MISMATCH, "output %s is declared %s but the value is a float literal", o->name,
                    tiny_dtype_name(o->dtype));
  o->v = v;
  return v;
}

hg_val hg_output(hg_graph *g, const char *name, hg_val v) {
  if (!g || g->err.code) return -1;
  const fe_node *n = fe_operand(g, v, "output");
  if (!n) return -1;
  if (n->op == HG_OP_CALL) return fe_failv(g, HARP_E_INVALID_ARG, "output %s: a call is not a value", name);
  fe_output *o = new_output(g, name);
  if (!o) return -1;
  o->dtype = n->weak ? TINY_FP32 : n->dtype;
  o->shape = n->shape;
  o->v = v;
  return v;
}

harp_status hg_program_bind_input(harp_error *e, const hg_program *p, const char *param, int rank, const int64_t *dims,
                                tiny_symtab *syms) {
  const hg_graph *g = hg_program_find(p, "main");
  if (!g) return ut_fail(e, HARP_E_INVALID_ARG, NULL, "the program has no graph named main");
  for (int i = 0; i < g->nparams; i++) {
    const fe_node *n = fe_node_of(g, g->params[i]);
    if (strcmp(n->name, param) != 0) continue;
    if (rank != n->shape.rank)
      return ut_fail(e, HARP_E_INPUT_MISMATCH, param, "input %s has rank %d, the model declares rank %d", param, rank,
                     n->shape.rank);
    for (int d = 0; d < rank; d++) {
      int64_t v, old;
      const char *sym = fe_dim_is_sym(n->shape.d[d]);
      if (fe_dim_is_int(n->shape.d[d], &v)) {
        if (v != dims[d])
          return ut_fail(e, HARP_E_INPUT_MISMATCH, param, "input %s axis %d is %" PRId64 ", the model declares %" PRId64,
                         param, d, dims[d], v);
      } else if (sym) {
        if (tiny_symtab_get(syms, sym, &old) && old != dims[d])
          return ut_fail(e, HARP_E_INPUT_MISMATCH, param, "input %s axis %d is %" PRId64 " but %s is already %" PRId64, param,
                         d, dims[d], sym, old);
        if (tiny_symtab_set(e, syms, sym, dims[d])) return e->code;
      }
    }
    return HARP_OK;
  }
  return ut_fail(e, HARP_E_USAGE, param, "the model has no parameter %s", param);
}
