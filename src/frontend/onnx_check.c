/* onnx_check.c — harp check: what harp will and will not do with an ONNX
 * model, in one go.  A static pass over the protobuf (every graph, the
 * nested ones in If / Loop / Scan attributes included) counts the op types
 * and lists those harp does not map, the element types it does not have
 * (graph inputs, initializers) and each graph input's dims, the dynamic
 * ones and whether the options give them.  Then the import runs with the
 * options, going on past a failing node (ox_check_node: the failure is
 * recorded, the nodes reading its outputs are skipped), so that every
 * refusal and every node that needs a dynamic dim's value is listed; with
 * every dim known, the lowering runs too.
 * Needs: onnx_load.c, onnx_shapes.c, the lowering.
 * Gives: onnx_check_file, onnx_report_free, ox_check_node,
 * ox_check_value_failed. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_int.h"

/* Append a formatted line to list[0..*n); false on no memory. */
static bool add_line(char ***list, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool add_line(char ***list, int *n, const char *fmt, ...) {
  char buf[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char **p = ut_xrealloc(*list, sizeof *p * (size_t)(*n + 1)), *s = ut_xmalloc(strlen(buf) + 1);
  if (p) *list = p;
  if (!p || !s) return free(s), false;
  strcpy(s, buf);
  (*list)[(*n)++] = s;
  return true;
}

/* ---- keep going past failures (called by the import) -------------------------------- */
/* The element types an initializer or a graph input can have in harp. */
static bool type_ok(int oty, bool input) {
  tiny_dtype dt;
  if (input) return ox_dtype(oty, &dt);
  return oty == OX_FLOAT || oty == OX_UINT8 || oty == OX_INT8 || oty == OX_UINT16 || oty == OX_INT16 || oty == OX_INT32 ||
         oty == OX_INT64 || oty == OX_BOOL || oty == OX_FLOAT16 || oty == OX_DOUBLE || oty == OX_UINT32 || oty == OX_UINT64 ||
         oty == OX_BFLOAT16;
}

/* The failure in c->e as a line of its list (an unknown op is the static
 * pass's), then cleared. */
static void record(ox_ctx *c) {
  onnx_report *r = c->report;
  bool ok = true;
  if (c->e->code == HARP_E_UNBOUND_SYMBOL) ok = add_line(&r->needs, &r->nneeds, "%s", c->e->msg);
  else if (c->e->code != HARP_E_UNKNOWN_OP) ok = add_line(&r->refused, &r->nrefused, "[%s] %s", harp_status_name(c->e->code), c->e->msg);
  harp_error_clear(c->e);
  fe_clear_error(c->g);
  if (!ok) ox_fail(c, HARP_E_NO_MEMORY, "out of memory");
}

/* Value `name` marked bad (made if the failure left it undefined). */
static void mark_bad(ox_ctx *c, const char *name) {
  if (!name || !*name || c->e->code) return;
  ox_val *x = ox_find(c, name);
  if (!x) x = ox_new_val(c, name);
  if (x) x->bad = true;
  if (c->e->code != HARP_E_NO_MEMORY) harp_error_clear(c->e);
}

harp_status ox_check_node(ox_ctx *c) {
  const Onnx__NodeProto *n = c->node;
  bool fed_bad = false;
  for (size_t i = 0; i < n->n_input && !fed_bad; i++) {
    ox_val *x = n->input[i][0] ? ox_find(c, n->input[i]) : NULL;
    fed_bad = x && x->bad;
  }
  if (fed_bad) { /* fed by a failed node: not tried */
    c->report->skipped++;
  } else {
    if (ox_import_node(c) == HARP_OK) return HARP_OK;
    if (c->e->code == HARP_E_NO_MEMORY) return c->e->code;
    record(c);
  }
  for (size_t k = 0; k < n->n_output; k++) mark_bad(c, n->output[k]);
  return c->e->code;
}

harp_status ox_check_value_failed(ox_ctx *c, const char *name, int oty) {
  if (c->e->code == HARP_E_NO_MEMORY) return c->e->code;
  bool input = !c->node && ox_find(c, name) == NULL; /* a graph input fails before its value exists */
  if (type_ok(oty, true) || (!input && type_ok(oty, false))) record(c); /* a type harp lacks: the static list has it */
  harp_error_clear(c->e);
  fe_clear_error(c->g);
  mark_bad(c, name);
  return c->e->code;
}

/* ---- the static pass ------------------------------------------------------------------------ */
#define MAX_OPS 512
typedef struct scan {
  onnx_report *r;
  const onnx_opts *o;
  char *op[MAX_OPS], first[MAX_OPS][272];
  int count[MAX_OPS], nop;
  int tcount[64];
  char tplaces[64][200];
  bool oom;
} scan;

/* One node of op type `key` ("Conv", or "domain.Op"); where says which. */
static void count_op(scan *s, const char *key, const char *where) {
  for (int i = 0; i < s->nop; i++)
    if (!strcmp(s->op[i], key)) {
      s->count[i]++;
      return;
    }
  if (s->nop == MAX_OPS) return;
  if (!(s->op[s->nop] = ut_xmalloc(strlen(key) + 1))) {
    s->oom = true;
    return;
  }
  strcpy(s->op[s->nop], key);
  snprintf(s->first[s->nop], sizeof s->first[0], "%s", where);
  s->count[s->nop++] = 1;
}

/* A value of a type harp lacks: counted by type, the first places named. */
static void bad_type(scan *s, int oty, const char *what, const char *name) {
  int t = oty >= 0 && oty < 64 ? oty : 0;
  char nm[96];
  ox_printable(name, nm, sizeof nm);
  size_t k = strlen(s->tplaces[t]);
  if (s->tcount[t]++ < 3 && k < sizeof s->tplaces[t])
    snprintf(s->tplaces[t] + k, sizeof s->tplaces[t] - k, "%s%s \"%s\"", k ? ", " : "", what, nm);
}

static void scan_graph(scan *s, const Onnx__GraphProto *gp, const char *prefix, int depth);

/* The nested graphs of node n (If's branches, Loop's and Scan's bodies). */
static void scan_subgraphs(scan *s, const Onnx__NodeProto *n, const char *where, int depth) {
  for (size_t a = 0; a < n->n_attribute; a++) {
    const Onnx__AttributeProto *at = n->attribute[a];
    char pre[400];
    snprintf(pre, sizeof pre, "%s, %s: ", where, at->name ? at->name : "?");
    if (at->g) scan_graph(s, at->g, pre, depth + 1);
    for (size_t k = 0; k < at->n_graphs; k++) scan_graph(s, at->graphs[k], pre, depth + 1);
  }
}

static void scan_graph(scan *s, const Onnx__GraphProto *gp, const char *prefix, int depth) {
  if (depth > 32) return; /* a malformed nesting: the import says so */
  s->r->ngraphs++;
  for (size_t i = 0; i < gp->n_initializer; i++)
    if (!type_ok(gp->initializer[i]->data_type, false)) bad_type(s, gp->initializer[i]->data_type, "initializer", gp->initializer[i]->name);
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *n = gp->node[i];
    char nm[96], where[260], key[200];
    ox_printable(n->name, nm, sizeof nm);
    snprintf(where, sizeof where, "%snode %zu \"%s\"", prefix, i, nm);
    const char *dom = n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0 ? n->domain : NULL;
    char op[96];
    ox_printable(n->op_type ? n->op_type : "", op, sizeof op);
    snprintf(key, sizeof key, "%s%s%s", dom ? dom : "", dom ? "." : "", op);
    s->r->nnodes++;
    count_op(s, key, where);
    scan_subgraphs(s, n, where, depth);
  }
}

/* Graph input vi's line: type, dims, the dynamic ones and how they are given. */
static void input_line(scan *s, const Onnx__ValueInfoProto *vi) {
  const Onnx__TypeProto *tp = vi->type;
  const Onnx__TypeProto__Tensor *tt = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
  char nm[96], dims[400] = "", dyn[120] = "";
  ox_printable(vi->name, nm, sizeof nm);
  if (tt && !type_ok(tt->elem_type, true)) bad_type(s, tt->elem_type, "graph input", vi->name);
  int64_t v[TINY_MAX_RANK];
  const char *params[TINY_MAX_RANK];
  int rank = tt && tt->shape && tt->shape->n_dim <= TINY_MAX_RANK ? (int)tt->shape->n_dim : -1, ndyn = 0;
  bool bound = true; /* every dynamic dim a dim_param that --sym binds */
  size_t kd = 0, ky = 0;
  for (int i = 0; i < rank; i++) {
    ox_dim_kind k = ox_kind_of(tt->shape->dim[i], &v[i], &params[i]);
    char tok[64] = "?", id[128];
    int64_t sv;
    if (k == D_FIXED) snprintf(tok, sizeof tok, "%" PRId64, v[i]);
    if (k == D_PARAM) ox_printable(params[i], tok, sizeof tok), ox_sanitize(params[i], id);
    bound &= k == D_FIXED || (k == D_PARAM && s->o && s->o->syms && tiny_symtab_get(s->o->syms, id, &sv));
    if (k != D_FIXED) v[i] = -1, ndyn++;
    if (kd < sizeof dims) kd += (size_t)snprintf(dims + kd, sizeof dims - kd, "%s%s", i ? ", " : "", tok);
    if (k != D_FIXED && ky < sizeof dyn) ky += (size_t)snprintf(dyn + ky, sizeof dyn - ky, "%s%d", ky ? ", " : "", i);
  }
  char id[128];
  ox_sanitize(vi->name, id);
  int given = -1;
  for (int k = 0; s->o && k < s->o->nshapes && given < 0; k++)
    if (!strcmp(s->o->shapes[k].name, vi->name) || !strcmp(s->o->shapes[k].name, id)) given = k;
  const char *tn = tt ? ox_type_name(tt->elem_type) : "not a tensor";
  if (rank < 0) {
    s->oom |= !add_line(&s->r->inputs, &s->r->ninputs, "%s: %s, no shape declared%s", nm, tn, given >= 0 ? "; its shape is given" : "");
    return;
  }
  if (!ndyn) {
    s->oom |= !add_line(&s->r->inputs, &s->r->ninputs, "%s: %s [%s]", nm, tn, dims);
    return;
  }
  char hint[300];
  ox_shape_hint(s->o ? s->o->shape_option : NULL, vi->name, rank, v, params, hint, sizeof hint);
  if (given < 0 && !bound) s->r->ndynamic += ndyn;
  s->oom |= !add_line(&s->r->inputs, &s->r->ninputs, "%s: %s [%s]: dynamic dim%s %s; %s%s", nm, tn, dims, ndyn > 1 ? "s" : "", dyn,
                      given >= 0 ? "given by a shape" : bound ? "given by --sym" : "not given: ", given >= 0 || bound ? "" : hint);
}

/* The report's static part from mp. */
static bool scan_model(const Onnx__ModelProto *mp, const onnx_opts *o, onnx_report *r) {
  scan *s = ut_xcalloc(1, sizeof *s);
  if (!s) return false;
  s->r = r, s->o = o;
  r->opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++)
    if (!mp->opset_import[i]->domain || !*mp->opset_import[i]->domain || !strcmp(mp->opset_import[i]->domain, "ai.onnx"))
      r->opset = mp->opset_import[i]->version;
  const Onnx__GraphProto *gp = mp->graph;
  scan_graph(s, gp, "", 0);
  for (size_t i = 0; i < gp->n_input; i++) {
    bool init = false;
    for (size_t k = 0; k < gp->n_initializer && !init; k++)
      init = gp->input[i]->name && gp->initializer[k]->name && !strcmp(gp->input[i]->name, gp->initializer[k]->name);
    if (!init) input_line(s, gp->input[i]);
  }
  for (int i = 0; i < s->nop; i++) {
    const char *op = s->op[i];
    s->oom |= !add_line(&r->ops, &r->nops, "%s %d", op, s->count[i]);
    const char *dot = strrchr(op, '.');
    char dom[96] = "";
    if (dot) snprintf(dom, sizeof dom, "%.*s", (int)(dot - op), op);
    if (dot ? !ox_find_quant(dom, dot + 1) : !ox_op_known(op))
      s->oom |= !add_line(&r->unknown_ops, &r->nunknown, "%s: %d node%s, first %s", op, s->count[i], s->count[i] > 1 ? "s" : "", s->first[i]);
    free(s->op[i]);
  }
  for (int t = 0; t < 64; t++)
    if (s->tcount[t])
      s->oom |= !add_line(&r->types, &r->ntypes, "%s: %s%s", ox_type_name(t), s->tplaces[t], s->tcount[t] > 3 ? ", ..." : "");
  bool ok = !s->oom;
  free(s);
  return ok;
}

/* ---- the check ---------------------------------------------------------------------------------- */
/* The lowering of an import whose dims are all known: a failure is r's. */
static bool lowers(const onnx_model *m, onnx_report *r) {
  harp_error le = {0};
  tiny_graph *g = NULL;
  tiny_symtab defaults, none;
  tiny_symtab_init(&defaults);
  tiny_symtab_init(&none);
  harp_status st = hg_lower_or_bind(&le, m->program, NULL, NULL, &g, &defaults);
  if (!st) st = tiny_prepare(&le, g, &none, false);
  if (st) add_line(&r->refused, &r->nrefused, "[%s] lowering: %s", harp_status_name(le.code), le.msg);
  tiny_graph_free(g);
  tiny_symtab_free(&defaults);
  tiny_symtab_free(&none);
  return !st;
}

harp_status onnx_check_file(harp_error *e, const char *path, const onnx_opts *o, onnx_report *r) {
  memset(r, 0, sizeof *r);
  Onnx__ModelProto *mp;
  char *dir;
  if (ox_read_model(e, path, &mp, &dir)) return e->code;
  if (!scan_model(mp, o, r)) {
    onnx__model_proto__free_unpacked(mp, NULL);
    free(dir);
    onnx_report_free(r);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  onnx_model m;
  harp_error ie = {0};
  memset(&m, 0, sizeof m);
  harp_status st = ox_import_model(&ie, mp, path, dir, o, r, &m); /* frees mp */
  free(dir);
  if (st == HARP_E_NO_MEMORY) {
    onnx_report_free(r);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  if (st && !r->nrefused && !r->nneeds && !r->skipped && !r->nunknown) /* a failure outside the nodes (opset, outputs) */
    add_line(&r->refused, &r->nrefused, "[%s] %s", harp_status_name(ie.code), ie.msg);
  r->imports = !st && (m.ndyn || lowers(&m, r));
  onnx_model_free(&m);
  return HARP_OK;
}

static void free_list(char **l, int n) {
  for (int i = 0; i < n; i++) free(l[i]);
  free(l);
}

void onnx_report_free(onnx_report *r) {
  if (!r) return;
  free_list(r->ops, r->nops);
  free_list(r->unknown_ops, r->nunknown);
  free_list(r->types, r->ntypes);
  free_list(r->inputs, r->ninputs);
  free_list(r->needs, r->nneeds);
  free_list(r->refused, r->nrefused);
  memset(r, 0, sizeof *r);
}
