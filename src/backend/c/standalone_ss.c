/* standalone_ss.c — the ShapeSet part of a standalone CPU package (harp
 * compile --shapeset): model_shapes.c, which checks a binding of the box's
 * symbols and gives the inputs' and outputs' shapes at it without harp, and
 * model_run_shape over the object's P_run_syms (rc_syms.c).  A binding is
 * refused (MODEL_E_BINDING, with the reason) when a symbol is outside the
 * box the object serves, a derived size (a strided conv's (H + 1)/2) falls
 * outside 1..its value at the upper corner, or one of the model's shape
 * rules that a size can break is broken: a Reshape's element count, the
 * sizes an element-wise op or an Expand must agree on.
 * Needs: a Function prepared at the box's upper corner (its dims name the
 * symbols they read).  Gives: cgen_ss_shapes, cgen_ss_output_dims. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standalone.h"

/* The index of symbol sym among s's varying ones, or -1. */
static int gen_index(const cgen_ss *s, const char *sym) {
  for (int i = 0; sym && i < s->ngen; i++)
    if (!strcmp(s->gen[i], sym)) return i;
  return -1;
}

/* Dim d of node n (rt_sgen_dim: sym -1 a constant, -2 unknown). */
static rt_sgen_dim dim_code(const cgen_ss *s, int n, int d) { return s->codes[n][d]; }

/* Dim x as C over v[] into buf[cap]; false when unknown. */
static bool dim_c(rt_sgen_dim x, char *buf, size_t cap) {
  if (x.sym == -1) snprintf(buf, cap, "%" PRId64 "LL", x.c);
  else if (x.sym >= 0 && x.a == 1 && x.c == 0 && x.k == 1) snprintf(buf, cap, "v[%d]", x.sym);
  else if (x.sym >= 0)
    snprintf(buf, cap, "fdiv_(%" PRId64 "LL * v[%d] + %" PRId64 "LL, %" PRId64 "LL)", x.a, x.sym, x.c, x.k);
  return x.sym != -2;
}

static int cmp_text(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* Node n's dims as a C product over v[] into buf[cap] (constants folded,
 * the other factors sorted: equal products read the same); false when a
 * dim is unknown. */
static bool numel_c(const cgen_ss *s, int n, char *buf, size_t cap) {
  char f[TINY_MAX_RANK][160];
  int nf = 0;
  int64_t lit = 1;
  for (int d = 0; d < s->g->nodes[n].shape.rank; d++) {
    rt_sgen_dim x = dim_code(s, n, d);
    if (x.sym == -1) lit *= x.c;
    else if (!dim_c(x, f[nf++], sizeof f[0])) return false;
  }
  qsort(f, (size_t)nf, sizeof f[0], cmp_text);
  size_t k = 0;
  for (int i = 0; i < nf && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s * ", f[i]);
  return k < cap && snprintf(buf + k, cap - k, "%" PRId64 "LL", lit) < (int)(cap - k);
}

/* Derived definition x as C over v[] (symbols: varying ones, else their
 * value at the corner); false when x holds something else. */
static bool expr_c(const cgen_ss *s, const tiny_expr *x, ut_str *o) {
  int64_t val;
  switch (x->k) {
  case TX_CONST: ut_str_printf(o, "%" PRId64 "LL", x->c); return true;
  case TX_SYM:
    if (gen_index(s, x->sym) >= 0) ut_str_printf(o, "v[%d]", gen_index(s, x->sym));
    else if (tiny_symtab_get(s->syms, x->sym, &val)) ut_str_printf(o, "%" PRId64 "LL", val);
    else return false;
    return true;
  case TX_ADD: case TX_MUL:
    ut_str_puts(o, "(");
    if (!expr_c(s, x->a, o)) return false;
    ut_str_puts(o, x->k == TX_ADD ? " + " : " * ");
    if (!expr_c(s, x->b, o)) return false;
    ut_str_puts(o, ")");
    return true;
  case TX_FLOORDIV: case TX_MOD:
    ut_str_puts(o, x->k == TX_MOD ? "mod_(" : "fdiv_(");
    if (!expr_c(s, x->a, o)) return false;
    ut_str_puts(o, ", ");
    if (!expr_c(s, x->b, o)) return false;
    ut_str_puts(o, ")");
    return true;
  default: return false;
  }
}

/* One shape rule: refused unless a == b (the texts), node n named. */
static void rule(ut_str *o, const char *a, const char *b, const tiny_node *n, const char *what) {
  if (!strcmp(a, b)) return;
  char safe[96];
  ut_sanitize_name(n->id, safe, sizeof safe);
  ut_str_printf(o, "  if ((%s) != (%s))\n    return refuse_(why, cap, \"this binding breaks the model: node %s: %s "
                   "(%%lld against %%lld)\", %s, %s);\n", a, b, safe, what, a, b);
}

/* The rules of node i whose sizes a binding can break (a dim neither
 * constant nor a symbol's value is left out). */
static void node_rules(const cgen_ss *s, int i, ut_str *o) {
  const tiny_node *n = &s->g->nodes[i];
  char a[512], b[512];
  if (n->op == TINY_RESHAPE && n->nsrc == 1 && n->src[0].node >= 0) {
    if (numel_c(s, n->src[0].node, a, sizeof a) && numel_c(s, i, b, sizeof b)) rule(o, a, b, n, "a Reshape's element counts differ");
    return;
  }
  if (!tiny_op_is_elementwise(n->op) && n->op != TINY_EXPAND) return;
  for (int k = 0; k < n->nsrc; k++) {
    if (n->src[k].node < 0 || s->g->nodes[n->src[k].node].shape.rank != n->shape.rank) continue;
    for (int d = 0; d < n->shape.rank; d++) {
      rt_sgen_dim cx = dim_code(s, n->src[k].node, d);
      if (cx.sym == -1 && cx.c == 1) continue; /* broadcast */
      if (dim_c(cx, a, sizeof a) && dim_c(dim_code(s, i, d), b, sizeof b)) rule(o, a, b, n, "the sizes of an element-wise op differ");
    }
  }
}

/* The shapes of the inputs or the outputs as a table name[][13]: a dim
 * is its constant, or -1 - j for dx_[j] = {i, a, c, k}: fdiv(a * v[i] + c, k);
 * the dx_ rows are appended to dx (*ndx of them, at most cap). */
static bool shape_table(const cgen_ss *s, ut_str *o, const char *name, bool outputs, rt_sgen_dim *dx, int *ndx, int cap) {
  ut_str_printf(o, "static const long long %s[][%d] = {", name, TINY_MAX_RANK + 1);
  for (int q = 0; q < (outputs ? s->f->nret : s->f->nargs); q++) {
    const fn_buffer *B = &s->f->buffers[outputs ? s->f->ret[q] : s->f->args[q]];
    if (!outputs && B->kind != FN_INPUT) continue;
    const tiny_shape *sh = &s->g->nodes[B->node].shape;
    ut_str_printf(o, "\n  {%d", sh->rank);
    for (int d = 0; d < sh->rank; d++) {
      rt_sgen_dim x = dim_code(s, B->node, d);
      if (x.sym == -2 || (x.sym >= 0 && *ndx == cap)) return false;
      if (x.sym == -1) ut_str_printf(o, ", %" PRId64, x.c);
      else dx[*ndx] = x, ut_str_printf(o, ", %d", -1 - (*ndx)++);
    }
    ut_str_puts(o, "},");
  }
  ut_str_puts(o, "\n  {0}};\n");
  return true;
}

/* The symbols' names, the box, the derivations and the shape rules. */
static bool emit_tables(const cgen_ss *s, ut_str *o) {
  ut_str_printf(o, "#define NGEN_ %d /* model_run_syms' symbols: the box's %d, then the derived ones */\n"
                   "#define NBASE_ %d\n\nconst char *const model_symbol_names[] = {",
                s->ngen, s->nbase, s->nbase);
  for (int i = 0; i < s->nbase; i++) {
    char safe[96];
    ut_sanitize_name(s->gen[i], safe, sizeof safe);
    ut_str_printf(o, "\"%s\", ", safe);
  }
  ut_str_puts(o, "NULL};\nconst long long model_symbol_lo[] = {");
  for (int i = 0; i < s->nbase; i++) ut_str_printf(o, "%" PRId64 ", ", s->lo[i]);
  ut_str_puts(o, "0};\nconst long long model_symbol_hi[] = {");
  for (int i = 0; i < s->nbase; i++) ut_str_printf(o, "%" PRId64 ", ", s->hi[i]);
  ut_str_puts(o, "0};\n/* every varying symbol's value at the upper corner (the arena's) */\nstatic const long long gen_hi_[] = {");
  for (int i = 0; i < s->ngen; i++) ut_str_printf(o, "%" PRId64 ", ", s->hi[i]);
  ut_str_puts(o, "0};\n");
  rt_sgen_dim dx[4 * TINY_MAX_RANK * 64];
  int ndx = 0, cap = (int)(sizeof dx / sizeof dx[0]);
  if (!shape_table(s, o, "in_dims_", false, dx, &ndx, cap) || !shape_table(s, o, "out_dims_", true, dx, &ndx, cap)) return false;
  ut_str_puts(o, "/* {i, a, c, k}: fdiv(a * v[i] + c, k) */\nstatic const long long dx_[][4] = {");
  for (int j = 0; j < ndx; j++) ut_str_printf(o, "{%d, %" PRId64 ", %" PRId64 ", %" PRId64 "}, ", dx[j].sym, dx[j].a, dx[j].c, dx[j].k);
  ut_str_puts(o, "{0, 1, 0, 1}};\n");
  ut_str_puts(o, "\nstatic long long fdiv_(long long a, long long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }\n"
                 "static long long mod_(long long a, long long b) { return a - fdiv_(a, b) * b; }\n\n"
                 "/* v[0..NBASE_) given: the derived symbols' values after them */\nstatic void derive_(long long *v) {\n"
                 "  (void)v;\n");
  for (int i = s->nbase; i < s->ngen; i++) {
    int k = tiny_dsym_find(s->g, s->gen[i]);
    ut_str_printf(o, "  v[%d] = ", i);
    if (k < 0 || !expr_c(s, s->g->dsyms[k].def, o)) return false;
    ut_str_puts(o, ";\n");
  }
  ut_str_puts(o, "}\n\nstatic int refuse_(char *why, size_t cap, const char *fmt, long long a, long long b) {\n"
                 "  if (why && cap) snprintf(why, cap, fmt, a, b);\n  return MODEL_E_BINDING;\n}\n\n"
                 "/* the model's shape rules that a binding v[0..NGEN_) can break */\n"
                 "static int rules_(const long long *v, char *why, size_t cap) {\n  (void)v; (void)why; (void)cap;\n");
  for (int i = 0; i < s->g->n; i++) node_rules(s, i, o);
  ut_str_puts(o, "  return 0;\n}\n\n");
  return true;
}

/* The ABI functions over the tables: fixed text. */
static const char ss_functions[] =
    "int model_num_symbols(void) { return NBASE_; }\n\n"
    "int model_check_binding(const long long *syms, char *why, size_t cap) {\n"
    "  long long v[NGEN_ + 1];\n"
    "  for (int i = 0; i < NBASE_; i++) {\n"
    "    if (syms[i] < model_symbol_lo[i] || syms[i] > model_symbol_hi[i]) {\n"
    "      if (why && cap) snprintf(why, cap, \"%s = %lld is outside the compiled ShapeSet (%s in %lld..%lld)\",\n"
    "                               model_symbol_names[i], syms[i], model_symbol_names[i], model_symbol_lo[i], model_symbol_hi[i]);\n"
    "      return MODEL_E_BINDING;\n    }\n    v[i] = syms[i];\n  }\n"
    "  derive_(v);\n"
    "  for (int i = NBASE_; i < NGEN_; i++)\n"
    "    if (v[i] < 1 || v[i] > gen_hi_[i])\n"
    "      return refuse_(why, cap, \"a size derived from the symbols is %lld, outside the compiled ShapeSet's 1..%lld\", v[i], gen_hi_[i]);\n"
    "  return rules_(v, why, cap);\n}\n\n"
    "/* a table entry (a constant, or -1 - j for dx_[j]) at v */\n"
    "static long long dim_at_(long long c, const long long *v) {\n"
    "  const long long *x = c >= 0 ? NULL : dx_[-1 - c];\n"
    "  return x ? fdiv_(x[1] * v[x[0]] + x[2], x[3]) : c;\n}\n\n"
    "/* row's shape at v into shape ({rank, d0, ...}) */\n"
    "static void shape_at_(const long long *row, const long long *v, long *shape) {\n"
    "  shape[0] = (long)row[0];\n"
    "  for (long d = 0; d < row[0]; d++) shape[1 + d] = (long)dim_at_(row[1 + d], v);\n}\n\n"
    "/* the binding syms checked, all symbols' values into v */\n"
    "static int all_syms_(const long long *syms, long long *v) {\n"
    "  int rc = model_check_binding(syms, NULL, 0);\n"
    "  for (int i = 0; i < NBASE_; i++) v[i] = syms[i];\n"
    "  derive_(v);\n  return rc;\n}\n\n"
    "int model_input_shape_at(const long long *syms, int k, long *shape) {\n"
    "  long long v[NGEN_ + 1];\n"
    "  if (k < 0 || k >= model_num_inputs()) return -1;\n"
    "  int rc = all_syms_(syms, v);\n  if (!rc) shape_at_(in_dims_[k], v, shape);\n  return rc;\n}\n\n"
    "int model_output_shape_at(const long long *syms, int k, long *shape) {\n"
    "  long long v[NGEN_ + 1];\n"
    "  if (k < 0 || k >= model_num_outputs()) return -1;\n"
    "  int rc = all_syms_(syms, v);\n  if (!rc) shape_at_(out_dims_[k], v, shape);\n  return rc;\n}\n\n"
    "int model_bind_inputs(const long *const *shapes, long long *syms, char *why, size_t cap) {\n"
    "  long long v[NGEN_ + 1];\n  int set[NGEN_ + 1] = {0};\n"
    "  for (int k = 0; k < model_num_inputs(); k++) { /* a symbol read from a dim that is its value */\n"
    "    const long long *row = in_dims_[k];\n"
    "    if (shapes[k][0] != row[0])\n"
    "      return refuse_(why, cap, \"an input has rank %lld, the model's is %lld\", shapes[k][0], row[0]);\n"
    "    for (long d = 0; d < row[0]; d++) {\n"
    "      const long long *x = row[1 + d] < 0 ? dx_[-1 - row[1 + d]] : NULL;\n"
    "      long long i = x ? x[0] : -1, s = shapes[k][1 + d];\n"
    "      if (!x || i >= NBASE_ || x[1] != 1 || x[2] || x[3] != 1) continue;\n"
    "      if (set[i] && v[i] != s)\n"
    "        return refuse_(why, cap, \"the inputs disagree on a shape symbol: %lld against %lld\", s, v[i]);\n"
    "      v[i] = s, set[i] = 1;\n    }\n  }\n"
    "  for (int i = 0; i < NBASE_; i++)\n"
    "    if (!set[i]) return refuse_(why, cap, \"no input fixes the box's symbol %lld (of %lld)\", i, NBASE_);\n"
    "  for (int i = 0; i < NBASE_; i++) syms[i] = v[i];\n"
    "  int rc = model_check_binding(syms, why, cap);\n  if (rc) return rc;\n  derive_(v);\n"
    "  for (int k = 0; k < model_num_inputs(); k++) /* every dim, now that the binding is known */\n"
    "    for (long d = 0; d < in_dims_[k][0]; d++)\n"
    "      if (shapes[k][1 + d] != dim_at_(in_dims_[k][1 + d], v))\n"
    "        return refuse_(why, cap, \"an input's dim is %lld, the binding makes it %lld\", shapes[k][1 + d],\n"
    "                       dim_at_(in_dims_[k][1 + d], v));\n"
    "  return 0;\n}\n\n"
    "size_t model_required_memory_at(const long long *syms) {\n"
    "  long long v[NGEN_ + 1];\n  return all_syms_(syms, v) ? 0 : model_required_memory_syms(v);\n}\n\n"
    "int model_run_shape(model_t *m, const long long *syms, const void *const *inputs, void *const *outputs) {\n"
    "  long long v[NGEN_ + 1];\n  int rc = all_syms_(syms, v);\n"
    "  return rc ? rc : model_run_syms(m, v, inputs, outputs);\n}\n";

bool cgen_ss_shapes(const cgen_ss *s, ut_str *o) {
  ut_str_puts(o, "/* model_shapes.c — the ShapeSet part of model.h: a binding of the box's\n"
                 " * symbols checked, the shapes at it, and a run at it (written by harp). */\n"
                 "#include <stdio.h>\n\n#include \"model.h\"\n\n"
                 "int model_run_syms(model_t *m, const long long *syms, const void *const *inputs, void *const *outputs);\n"
                 "size_t model_required_memory_syms(const long long *syms);\n\n");
  if (!emit_tables(s, o)) return false;
  ut_str_puts(o, ss_functions);
  return !o->oom;
}

bool cgen_ss_output_dims(const cgen_ss *s, const tiny_symtab *t, int k, int64_t *dims) {
  int n = s->f->buffers[s->f->ret[k]].node;
  for (int d = 0; d < s->g->nodes[n].shape.rank; d++) {
    rt_sgen_dim x = dim_code(s, n, d);
    int64_t v = 0;
    if (x.sym == -2 || (x.sym >= 0 && !tiny_symtab_get(t, s->gen[x.sym], &v))) return false;
    int64_t y = x.a * v + x.c;
    dims[d] = x.sym < 0 ? x.c : y >= 0 ? y / x.k : -((-y + x.k - 1) / x.k);
  }
  return true;
}
