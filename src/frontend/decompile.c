/* decompile.c — a program back to DSL text.
 * Needs: the graph model.  Gives: hg_decompile.
 *
 * Subgraphs come first (in definition order), main last.  Every named
 * value and every value used more than once gets a statement; an unnamed
 * value used once is written inside its user's expression, and unnamed
 * number literals are always written in place.  Names that are not usable
 * DSL identifiers (or are taken) are replaced by fresh ones.  Parsing the
 * text gives a program hg_program_equal to the original. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fe_dsl.h"

typedef struct dctx {
  ut_str *s;
  const hg_graph *g;
  const char **name; /* per node: its statement name, NULL when written in place */
  int *uses;
  bool oom;
} dctx;

static const char *dtype_dsl(tiny_dtype t) {
  static const char *const n[] = {"f16", "bf16", "f32", "i32", "bool", "i8", "u8"};
  return (unsigned)t < TINY_DTYPE_COUNT ? n[t] : "f32";
}

static void put_num(ut_str *s, double v) {
  if (isnan(v)) {
    ut_str_puts(s, "nan");
    return;
  }
  if (isinf(v)) {
    ut_str_puts(s, v < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%.17g", v);
  /* the shortest text that reads back to the same double */
  for (int p = 1; p <= 17; p++) {
    char t[64];
    snprintf(t, sizeof t, "%.*g", p, v);
    if (strtod(t, NULL) == v) {
      snprintf(buf, sizeof buf, "%s", t);
      break;
    }
  }
  ut_str_puts(s, buf);
  if (!strpbrk(buf, ".eE")) ut_str_puts(s, ".0");
}

static void put_type(ut_str *s, tiny_dtype dt, const fe_shape *sh) {
  ut_str_printf(s, "%s[", dtype_dsl(dt));
  for (int i = 0; i < sh->rank; i++) ut_str_printf(s, "%s%s", i ? ", " : "", sh->d[i]->text);
  ut_str_puts(s, "]");
}

static void put_ints(ut_str *s, const int64_t *v, int n) {
  ut_str_puts(s, "[");
  for (int i = 0; i < n; i++) ut_str_printf(s, "%s%" PRId64, i ? ", " : "", v[i]);
  ut_str_puts(s, "]");
}

static void put_int_list(ut_str *s, const int *v, int n) {
  ut_str_puts(s, "[");
  for (int i = 0; i < n; i++) ut_str_printf(s, "%s%d", i ? ", " : "", v[i]);
  ut_str_puts(s, "]");
}

static void put_dims(ut_str *s, const fe_dim *const *d, int n) {
  ut_str_puts(s, "[");
  for (int i = 0; i < n; i++) ut_str_printf(s, "%s%s", i ? ", " : "", d[i]->text);
  ut_str_puts(s, "]");
}

/* ---- expressions ---------------------------------------------------------- */
enum { P_CMP = 1, P_SUM = 2, P_TERM = 3, P_ATOM = 4 };

static void expr(dctx *C, hg_val v, int ctx);

static const char *infix(hg_op op, int *prec) {
  switch (op) {
  case HG_OP_ADD: *prec = P_SUM; return " + ";
  case HG_OP_SUB: *prec = P_SUM; return " - ";
  case HG_OP_MUL: *prec = P_TERM; return " * ";
  case HG_OP_DIV: *prec = P_TERM; return " / ";
  case HG_OP_MATMUL: *prec = P_TERM; return " @ ";
  case HG_OP_LT: *prec = P_CMP; return " < ";
  case HG_OP_LE: *prec = P_CMP; return " <= ";
  case HG_OP_GT: *prec = P_CMP; return " > ";
  case HG_OP_GE: *prec = P_CMP; return " >= ";
  case HG_OP_EQ: *prec = P_CMP; return " == ";
  case HG_OP_NE: *prec = P_CMP; return " != ";
  default: return NULL;
  }
}

static void args_then(dctx *C, const fe_node *n, int from, int to) {
  for (int i = from; i < to; i++) {
    if (i > from) ut_str_puts(C->s, ", ");
    expr(C, n->in[i], 0);
  }
}

/* const(...) */
static void rhs_const(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  if (n->weak) {
    bool paren = n->a.cnst.v < 0 && ctx > P_SUM; /* -2.0 reads as a literal anyway; keep it clear */
    if (paren) ut_str_putc(s, '(');
    put_num(s, n->a.cnst.v);
    if (paren) ut_str_putc(s, ')');
  } else {
    ut_str_puts(s, "constant(");
    put_num(s, n->a.cnst.v);
    ut_str_printf(s, ", %s)", dtype_dsl(n->dtype));
  }
}

/* sum, rmax, rmin, mean(...) */
static void rhs_sum(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_printf(s, "%s(", hg_op_name(n->op));
  expr(C, n->in[0], 0);
  ut_str_puts(s, ", axes=");
  put_int_list(s, n->a.reduce.axes, n->a.reduce.n);
  if (n->a.reduce.keepdim) ut_str_puts(s, ", keepdim=true");
  ut_str_puts(s, ")");
}

/* conv2d(...) */
static void rhs_conv2d(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "conv2d(");
  args_then(C, n, 0, 2);
  if (n->nin > 2 && n->in[2] > 0) {
    ut_str_puts(s, ", bias=");
    expr(C, n->in[2], 0);
  }
  const int64_t *st = n->a.conv.stride, *p = n->a.conv.pad, *d = n->a.conv.dilation;
  if (st[0] != 1 || st[1] != 1) ut_str_puts(s, ", stride="), put_ints(s, st, 2);
  if (p[0] || p[1] || p[2] || p[3]) ut_str_puts(s, ", pad="), put_ints(s, p, 4);
  if (d[0] != 1 || d[1] != 1) ut_str_puts(s, ", dilation="), put_ints(s, d, 2);
  if (n->a.conv.groups != 1) ut_str_printf(s, ", groups=%" PRId64, n->a.conv.groups);
  ut_str_puts(s, ")");
}

/* attention(...) */
static void rhs_attention(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "attention(");
  args_then(C, n, 0, 3);
  if (n->a.attn.heads != 1) ut_str_printf(s, ", heads=%d", n->a.attn.heads);
  if (n->a.attn.causal) ut_str_puts(s, ", causal=true");
  if (n->nin > 3 && n->in[3] > 0) {
    ut_str_puts(s, ", mask=");
    expr(C, n->in[3], 0);
  }
  if (n->a.attn.scale != 0) ut_str_puts(s, ", scale="), put_num(s, n->a.attn.scale);
  ut_str_puts(s, ")");
}

/* layernorm(...) */
static void rhs_layernorm(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "layernorm(");
  expr(C, n->in[0], 0);
  const char *names[3] = {NULL, "gamma", "beta"};
  for (int i = 1; i <= 2; i++)
    if (n->in[i] > 0) {
      ut_str_printf(s, ", %s=", names[i]);
      expr(C, n->in[i], 0);
    }
  if (n->a.ln.axis != n->shape.rank - 1) ut_str_printf(s, ", axis=%d", n->a.ln.axis);
  if (n->a.ln.eps != 1e-5) ut_str_puts(s, ", eps="), put_num(s, n->a.ln.eps);
  ut_str_puts(s, ")");
}

/* softmax(...) */
static void rhs_softmax(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "softmax(");
  expr(C, n->in[0], 0);
  if (n->a.axis.axis != n->shape.rank - 1) ut_str_printf(s, ", axis=%d", n->a.axis.axis);
  ut_str_puts(s, ")");
}

/* max_pool2d, avg_pool2d(...) */
static void rhs_max_pool2d(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_printf(s, "%s(", hg_op_name(n->op));
  expr(C, n->in[0], 0);
  ut_str_puts(s, ", kernel=");
  put_ints(s, n->a.pool.kernel, 2);
  ut_str_puts(s, ", stride=");
  put_ints(s, n->a.pool.stride, 2);
  ut_str_puts(s, ")");
}

/* reshape, expand(...) */
static void rhs_reshape(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_printf(s, "%s(", hg_op_name(n->op));
  expr(C, n->in[0], 0);
  ut_str_puts(s, ", ");
  put_dims(s, n->a.shape.to.d, n->a.shape.to.rank);
  ut_str_puts(s, ")");
}

/* permute, flip(...) */
static void rhs_permute(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_printf(s, "%s(", hg_op_name(n->op));
  expr(C, n->in[0], 0);
  ut_str_puts(s, ", ");
  put_int_list(s, n->a.perm.v, n->a.perm.n);
  ut_str_puts(s, ")");
}

/* pad(...) */
static void rhs_pad(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "pad(");
  expr(C, n->in[0], 0);
  ut_str_puts(s, ", [");
  for (int i = 0; i < n->a.pad.n; i++) ut_str_printf(s, "%s[%" PRId64 ", %" PRId64 "]", i ? ", " : "", n->a.pad.lo[i], n->a.pad.hi[i]);
  ut_str_puts(s, "]");
  if (n->a.pad.value != 0 || signbit(n->a.pad.value)) ut_str_puts(s, ", value="), put_num(s, n->a.pad.value);
  ut_str_puts(s, ")");
}

/* slice(...) */
static void rhs_slice(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "slice(");
  expr(C, n->in[0], 0);
  ut_str_puts(s, ", ");
  put_dims(s, n->a.slice.start, n->a.slice.n);
  ut_str_puts(s, ", ");
  put_dims(s, n->a.slice.end, n->a.slice.n);
  bool steps = false;
  for (int i = 0; i < n->a.slice.n; i++) steps |= n->a.slice.step[i] != 1;
  if (steps) ut_str_puts(s, ", steps="), put_ints(s, n->a.slice.step, n->a.slice.n);
  ut_str_puts(s, ")");
}

/* concat(...) */
static void rhs_concat(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "concat([");
  args_then(C, n, 0, n->nin);
  ut_str_printf(s, "], axis=%d)", n->a.axis.axis);
}

/* cast(...) */
static void rhs_cast(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "cast(");
  expr(C, n->in[0], 0);
  ut_str_printf(s, ", %s)", dtype_dsl(n->a.cast.to));
}

/* gather(...) */
static void rhs_gather(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_puts(s, "gather(");
  args_then(C, n, 0, 2);
  ut_str_printf(s, ", axis=%d)", n->a.axis.axis);
}

/* call(...) */
static void rhs_call(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  (void)ctx;
  ut_str_printf(s, "%s(", n->a.call.callee->name);
  args_then(C, n, 0, n->nin);
  ut_str_puts(s, ")");
}

typedef void (*rhs_fn)(dctx *C, const fe_node *n, int ctx);

/* The printer of each op with its own spelling (the rest: name(args)). */
static const rhs_fn RHS[HG_OP_COUNT] = {
    [HG_OP_CONST] = rhs_const,
    [HG_OP_SUM] = rhs_sum,
    [HG_OP_RMAX] = rhs_sum,
    [HG_OP_RMIN] = rhs_sum,
    [HG_OP_MEAN] = rhs_sum,
    [HG_OP_CONV2D] = rhs_conv2d,
    [HG_OP_ATTENTION] = rhs_attention,
    [HG_OP_LAYERNORM] = rhs_layernorm,
    [HG_OP_SOFTMAX] = rhs_softmax,
    [HG_OP_MAX_POOL2D] = rhs_max_pool2d,
    [HG_OP_AVG_POOL2D] = rhs_max_pool2d,
    [HG_OP_RESHAPE] = rhs_reshape,
    [HG_OP_EXPAND] = rhs_reshape,
    [HG_OP_PERMUTE] = rhs_permute,
    [HG_OP_FLIP] = rhs_permute,
    [HG_OP_PAD] = rhs_pad,
    [HG_OP_SLICE] = rhs_slice,
    [HG_OP_CONCAT] = rhs_concat,
    [HG_OP_CAST] = rhs_cast,
    [HG_OP_GATHER] = rhs_gather,
    [HG_OP_CALL] = rhs_call,
};

/* The right-hand side of node n (ctx: the precedence around it). */
static void rhs(dctx *C, const fe_node *n, int ctx) {
  ut_str *s = C->s;
  int prec;
  const char *op = infix(n->op, &prec);
  if (op) {
    bool paren = prec < ctx;
    if (paren) ut_str_putc(s, '(');
    expr(C, n->in[0], prec == P_CMP ? P_SUM : prec);
    ut_str_puts(s, op);
    expr(C, n->in[1], prec == P_CMP ? P_SUM : prec + 1);
    if (paren) ut_str_putc(s, ')');
    return;
  }
  if ((unsigned)n->op < HG_OP_COUNT && RHS[n->op]) {
    RHS[n->op](C, n, ctx);
    return;
  }
  /* unary functions, where, max/min */
  ut_str_printf(s, "%s(", hg_op_name(n->op));
  args_then(C, n, 0, n->nin);
  ut_str_puts(s, ")");
}

static void expr(dctx *C, hg_val v, int ctx) {
  const fe_node *n = fe_node_of(C->g, v);
  if (!n) {
    C->oom = true;
    return;
  }
  if (C->name[v]) ut_str_puts(C->s, C->name[v]);
  else rhs(C, n, ctx);
}

/* ---- names -------------------------------------------------------------------- */
typedef ut_strmap names;

static bool taken(const names *N, const char *s) { return ut_strmap_find(N, s) != NULL; }

static const char *claim(names *N, ut_arena *A, const char *want, int v) {
  const char *s = want && fe_is_ident(want) && !fe_is_reserved(want, (int)strlen(want)) && !taken(N, want) ? want : NULL;
  for (int k = 1; !s; k++) {
    const char *t = want && fe_is_ident(want) && !fe_is_reserved(want, (int)strlen(want)) ? ut_arena_printf(A, "%s_%d", want, k)
                                                                                          : ut_arena_printf(A, "t%d", v + k - 1);
    if (!t) return NULL;
    if (!taken(N, t)) s = t;
  }
  return ut_strmap_put(N, s, v) ? s : NULL;
}

static bool decompile_graph(ut_str *s, const hg_graph *g, ut_arena *A) {
  names N = {0};
  const char **name = ut_xcalloc((size_t)g->n + 2, sizeof *name);
  int *uses = ut_xcalloc((size_t)g->n + 2, sizeof *uses);
  bool ok = name && uses;
  for (int i = 0; i < g->nsv && ok; i++) ok = claim(&N, A, g->sv[i].name, 0) != NULL;
  for (int i = 0; i < g->n && ok; i++)
    for (int j = 0; j < g->nodes[i].nin; j++)
      if (g->nodes[i].in[j] > 0) uses[g->nodes[i].in[j]]++;
  for (int k = 0; k < g->nout && ok; k++)
    if (g->outs[k].v > 0) uses[g->outs[k].v]++;
  /* height[v]: how deep v's expression nests when written in place; a
   * statement starts afresh (the printer and the parser recurse) */
  int *height = ut_xcalloc((size_t)g->n + 2, sizeof *height);
  ok = ok && height;
  for (int v = 1; v <= g->n && ok; v++) {
    const fe_node *n = fe_node_of(g, v);
    bool in_place = !n->name && n->op != HG_OP_INPUT && n->op != HG_OP_CALL && n->op != HG_OP_PROJ &&
                    ((n->op == HG_OP_CONST && n->weak) || uses[v] == 1);
    int h = 1;
    for (int j = 0; j < n->nin; j++)
      if (n->in[j] > 0 && height[n->in[j]] + 1 > h) h = height[n->in[j]] + 1;
    if (in_place && h > 32 && !(n->op == HG_OP_CONST && n->weak)) in_place = false;
    height[v] = in_place ? h : 0;
    if (n->op == HG_OP_CALL) continue; /* written through its PROJ nodes */
    if (!in_place && !(name[v] = claim(&N, A, n->name, v))) ok = false;
  }
  free(height);
  if (!ok) goto done;
  ut_str_puts(s, "graph");
  if (g->nsv) {
    ut_str_puts(s, "<");
    for (int i = 0; i < g->nsv; i++) {
      ut_str_printf(s, "%s%s", i ? ", " : "", g->sv[i].name);
      if (g->sv[i].dflt >= 0) ut_str_printf(s, "=%" PRId64, g->sv[i].dflt);
    }
    ut_str_puts(s, ">");
  }
  ut_str_printf(s, " %s(", g->name);
  for (int i = 0; i < g->nparams; i++) {
    const fe_node *p = fe_node_of(g, g->params[i]);
    ut_str_printf(s, "%s%s: ", i ? ", " : "", name[g->params[i]]);
    put_type(s, p->dtype, &p->shape);
  }
  ut_str_puts(s, ") -> (");
  for (int k = 0; k < g->nout; k++) {
    ut_str_printf(s, "%s%s: ", k ? ", " : "", g->outs[k].name);
    put_type(s, g->outs[k].dtype, &g->outs[k].shape);
  }
  ut_str_puts(s, ") {\n");
  dctx C = {s, g, name, uses, false};
  for (int v = 1; v <= g->n; v++) {
    const fe_node *n = fe_node_of(g, v);
    if (n->op == HG_OP_INPUT || n->op == HG_OP_PROJ || (!name[v] && n->op != HG_OP_CALL)) continue;
    ut_str_puts(s, "    ");
    if (n->op == HG_OP_CALL) {
      int k0 = v + 1, nout = n->a.call.nout; /* its PROJ nodes follow it */
      if (nout > 1) ut_str_puts(s, "(");
      for (int k = 0; k < nout; k++) ut_str_printf(s, "%s%s", k ? ", " : "", name[k0 + k] ? name[k0 + k] : "_");
      ut_str_puts(s, nout > 1 ? ") = " : " = ");
    } else {
      ut_str_printf(s, "%s = ", name[v]);
    }
    rhs(&C, n, 0);
    ut_str_puts(s, "\n");
  }
  ut_str_puts(s, "    return ");
  for (int k = 0; k < g->nout; k++) {
    if (k) ut_str_puts(s, ", ");
    expr(&C, g->outs[k].v, 0);
  }
  ut_str_puts(s, "\n}\n");
  ok = !C.oom;
done:
  ut_strmap_free(&N);
  free(name);
  free(uses);
  return ok;
}

char *hg_decompile(const hg_program *p) {
  ut_str s;
  ut_str_init(&s);
  ut_arena *A = ut_arena_new();
  bool ok = A != NULL;
  const hg_graph *main = hg_program_find(p, "main");
  for (int i = 0; i < p->n && ok; i++)
    if (p->graphs[i] != main) {
      ok = decompile_graph(&s, p->graphs[i], A);
      ut_str_puts(&s, "\n");
    }
  if (ok && main) ok = decompile_graph(&s, main, A);
  ut_arena_free(A);
  if (!ok || s.oom) {
    ut_str_free(&s);
    return NULL;
  }
  return ut_str_take(&s);
}
