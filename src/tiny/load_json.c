/* load_json.c — read Tiny IR JSON: the canonical seed 001 dialect here, the
 * seed 000 ops/values dialect in load_ops.c.
 * Needs: jansson, the builder.  Gives: tiny_load_json / tiny_load_file.
 *
 * `//` and block comments are accepted (seed 001's own examples carry them):
 * they are blanked out before parsing, so reported line:column positions
 * still point into the original text. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "load_int.h"
#include "util/json_kind.h"
#include "util/util.h"

#define MAX_MODEL_BYTES ((size_t)256 << 20)

static bool lfail(lctx *c, harp_status code, const char *fmt, const char *a, const char *b) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
  ut_fail(c->e, code, c->node, "%s", msg);
  if (c->file && !c->e->file[0]) snprintf(c->e->file, sizeof c->e->file, "%s", c->file);
  return false;
}

static bool is_ident(const char *s) {
  if (!*s || strlen(s) > 64 || !(isalpha((unsigned char)*s) || *s == '_')) return false;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
  return true;
}

bool ld_dim(lctx *c, json_t *v, const char *what, tiny_dim *out) {
  if (json_is_integer(v)) {
    json_int_t x = json_integer_value(v);
    if (x < 0 || x > TINY_MAX_DIM) return lfail(c, HARP_E_INVALID_ARG, "%s: %s", what, "value out of range [0, 2^40]");
    *out = tiny_dim_int(x);
    return true;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d != floor(d) || d < 0 || d > (double)TINY_MAX_DIM)
      return lfail(c, HARP_E_INVALID_ARG, "%s: %s", what, "expected a non-negative integer");
    *out = tiny_dim_int((int64_t)d);
    return true;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (*s && strspn(s, "0123456789") == strlen(s)) {
      if (strlen(s) > 13) return lfail(c, HARP_E_INVALID_ARG, "%s: %s", what, "value out of range [0, 2^40]");
      *out = tiny_dim_int(strtoll(s, NULL, 10));
      return true;
    }
    if (!is_ident(s)) return lfail(c, HARP_E_INVALID_ARG, "%s: \"%s\" is neither an integer nor a symbol name", what, s);
    *out = tiny_dim_sym(s); /* the builder copies it */
    return true;
  }
  char buf[128];
  snprintf(buf, sizeof buf, "expected an integer or a symbol, got %s", ut_json_kind(v));
  return lfail(c, HARP_E_INVALID_ARG, "%s: %s", what, buf);
}

static bool need_array(lctx *c, json_t *v, const char *what) {
  if (!json_is_array(v)) {
    char buf[128];
    snprintf(buf, sizeof buf, "expected an array, got %s", v ? ut_json_kind(v) : "nothing");
    return lfail(c, HARP_E_INVALID_ARG, "%s: %s", what, buf);
  }
  if (json_array_size(v) > TINY_MAX_RANK) {
    char buf[64];
    snprintf(buf, sizeof buf, "more than %d entries", TINY_MAX_RANK);
    return lfail(c, HARP_E_LIMIT, "%s: %s", what, buf);
  }
  return true;
}

bool ld_dims(lctx *c, json_t *v, const char *what, tiny_dim *out, int *n) {
  if (!need_array(c, v, what)) return false;
  *n = (int)json_array_size(v);
  for (int i = 0; i < *n; i++)
    if (!ld_dim(c, json_array_get(v, (size_t)i), what, &out[i])) return false;
  return true;
}

bool ld_shape(lctx *c, json_t *v, const char *what, tiny_shape *out) {
  memset(out, 0, sizeof *out);
  return ld_dims(c, v, what, out->d, &out->rank);
}

bool ld_ints(lctx *c, json_t *v, const char *what, int *out, int *n) {
  if (!need_array(c, v, what)) return false;
  *n = (int)json_array_size(v);
  for (int i = 0; i < *n; i++) {
    json_t *x = json_array_get(v, (size_t)i);
    if (!json_is_integer(x) || json_integer_value(x) < -TINY_MAX_RANK || json_integer_value(x) > 1000)
      return lfail(c, HARP_E_INVALID_ARG, "%s: %s", what, "expected small integers");
    out[i] = (int)json_integer_value(x);
  }
  return true;
}

bool ld_number(lctx *c, json_t *v, const char *what, double *out) {
  if (json_is_number(v)) {
    *out = json_number_value(v);
    return true;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (!strcmp(s, "inf") || !strcmp(s, "+inf")) return *out = INFINITY, true;
    if (!strcmp(s, "-inf")) return *out = -INFINITY, true;
    if (!strcmp(s, "nan")) return *out = NAN, true;
  }
  return lfail(c, HARP_E_INVALID_ARG, "%s: %s", what, "expected a number (or \"inf\", \"-inf\", \"nan\")");
}

bool ld_dtype(lctx *c, json_t *v, const char *what, tiny_dtype *out) {
  int t = json_is_string(v) ? tiny_dtype_parse(json_string_value(v)) : -1;
  if (t < 0) return lfail(c, HARP_E_INVALID_ARG, "%s: %s", what, "expected one of fp16, bf16, fp32, i32, bool");
  *out = (tiny_dtype)t;
  return true;
}

bool ld_only_keys(lctx *c, json_t *obj, const char *where, const char *const *allowed) {
  const char *key;
  json_t *val;
  json_object_foreach(obj, key, val) {
    bool ok = false;
    for (int i = 0; allowed[i] && !ok; i++) ok = strcmp(key, allowed[i]) == 0;
    if (!ok) return lfail(c, HARP_E_INVALID_ARG, "%s: unknown key \"%s\"", where, key);
  }
  return true;
}

/* ---- args --------------------------------------------------------------- */
static json_t *req(lctx *c, json_t *arg, const char *key) {
  json_t *v = json_object_get(arg, key);
  if (!v) lfail(c, HARP_E_INVALID_ARG, "arg: missing \"%s\"", key, NULL);
  return v;
}

static bool ld_pad_pairs(lctx *c, json_t *v, tiny_arg_pad *a) {
  if (!need_array(c, v, "pad")) return false;
  a->n = (int)json_array_size(v);
  for (int i = 0; i < a->n; i++) {
    json_t *p = json_array_get(v, (size_t)i);
    if (!json_is_array(p) || json_array_size(p) != 2)
      return lfail(c, HARP_E_INVALID_ARG, "%s: %s", "pad", "each entry must be [lo, hi]");
    if (!ld_dim(c, json_array_get(p, 0), "pad", &a->lo[i]) || !ld_dim(c, json_array_get(p, 1), "pad", &a->hi[i]))
      return false;
  }
  return true;
}

static bool ld_index_map(lctx *c, json_t *v, int out_rank, tiny_arg_view *a) {
  /* Accept a list of expression strings, or {"exprs": [...]} */
  if (json_is_object(v)) {
    static const char *const keys[] = {"exprs", NULL};
    if (!ld_only_keys(c, v, "index_map", keys)) return false;
    v = json_object_get(v, "exprs");
  }
  if (!need_array(c, v, "index_map")) return false;
  a->n = (int)json_array_size(v);
  for (int j = 0; j < a->n; j++) {
    json_t *x = json_array_get(v, (size_t)j);
    if (json_is_integer(x)) {
      a->map[j] = tiny_x_const(c->g, json_integer_value(x));
      if (!a->map[j]) return lfail(c, HARP_E_NO_MEMORY, "%s%s", "out of memory", NULL);
      continue;
    }
    if (!json_is_string(x)) return lfail(c, HARP_E_INVALID_ARG, "%s: %s", "index_map", "entries must be strings");
    if (tiny_expr_parse(c->e, c->g, json_string_value(x), out_rank, &a->map[j])) {
      snprintf(c->e->node, sizeof c->e->node, "%s", c->node ? c->node : "");
      return false;
    }
  }
  return true;
}

/* INPUT: tensor_id, dtype, shape, storage? */
static bool arg_input(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"tensor_id", "dtype", "shape", "storage", NULL};
  if (!ld_only_keys(c, arg, "INPUT arg", keys)) return false;
  if (!(v = req(c, arg, "tensor_id"))) return false;
  if (!json_is_string(v) || !json_string_length(v))
    return lfail(c, HARP_E_INVALID_ARG, "%s: %s", "tensor_id", "expected a non-empty string");
  out->input.tensor_id = json_string_value(v);
  if (!(v = req(c, arg, "dtype")) || !ld_dtype(c, v, "dtype", &out->input.dtype)) return false;
  if (!(v = req(c, arg, "shape")) || !ld_shape(c, v, "shape", &out->input.shape)) return false;
  if ((v = json_object_get(arg, "storage"))) {
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (strcmp(s, "input") && strcmp(s, "param"))
      return lfail(c, HARP_E_INVALID_ARG, "%s: %s", "storage", "expected \"input\" or \"param\"");
    out->input.storage = s;
  }
  return true;
}

/* CONST: value, dtype */
static bool arg_const(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"value", "dtype", NULL};
  if (!ld_only_keys(c, arg, "CONST arg", keys)) return false;
  return (v = req(c, arg, "value")) && ld_number(c, v, "value", &out->cnst.value) && (v = req(c, arg, "dtype")) &&
         ld_dtype(c, v, "dtype", &out->cnst.dtype);
}

/* RESHAPE: result_shape */
static bool arg_reshape(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"result_shape", NULL};
  return ld_only_keys(c, arg, "RESHAPE arg", keys) && (v = req(c, arg, "result_shape")) &&
         ld_shape(c, v, "result_shape", &out->reshape.shape);
}

/* PERMUTE: perm */
static bool arg_permute(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"perm", NULL};
  return ld_only_keys(c, arg, "PERMUTE arg", keys) && (v = req(c, arg, "perm")) &&
         ld_ints(c, v, "perm", out->permute.perm, &out->permute.n);
}

/* EXPAND: result_shape, broadcast_dimensions? */
static bool arg_expand(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"result_shape", "broadcast_dimensions", NULL};
  if (!ld_only_keys(c, arg, "EXPAND arg", keys) || !(v = req(c, arg, "result_shape")) ||
      !ld_shape(c, v, "result_shape", &out->expand.shape))
    return false;
  if ((v = json_object_get(arg, "broadcast_dimensions"))) {
    out->expand.has_bd = true;
    return ld_ints(c, v, "broadcast_dimensions", out->expand.bd, &out->expand.nbd);
  }
  return true;
}

/* PAD: pad [[lo, hi]...], value? */
static bool arg_pad(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"pad", "value", NULL};
  if (!ld_only_keys(c, arg, "PAD arg", keys) || !(v = req(c, arg, "pad")) || !ld_pad_pairs(c, v, &out->pad))
    return false;
  return !(v = json_object_get(arg, "value")) || ld_number(c, v, "value", &out->pad.value);
}

/* SHRINK: lo, hi, step? (steps >= 0) */
static bool arg_shrink(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"lo", "hi", "step", NULL};
  int nl, nh, ns;
  if (!ld_only_keys(c, arg, "SHRINK arg", keys) || !(v = req(c, arg, "lo")) || !ld_dims(c, v, "lo", out->shrink.lo, &nl) ||
      !(v = req(c, arg, "hi")) || !ld_dims(c, v, "hi", out->shrink.hi, &nh))
    return false;
  out->shrink.n = nl;
  for (int i = 0; i < TINY_MAX_RANK; i++) out->shrink.step[i] = tiny_dim_int(1);
  if ((v = json_object_get(arg, "step"))) {
    for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++) {
      json_t *x = json_array_get(v, i);
      if (json_is_integer(x) && json_integer_value(x) < 0) {
        ut_fail(c->e, HARP_E_NEGATIVE_STRIDE, c->node, "SHRINK step %lld is negative; use FLIP to reverse an axis",
                (long long)json_integer_value(x));
        return false;
      }
    }
    if (!ld_dims(c, v, "step", out->shrink.step, &ns)) return false;
    out->shrink.has_step = true;
    if (ns != nl) return lfail(c, HARP_E_INVALID_ARG, "SHRINK: %s%s", "lo, hi and step need the same length", NULL);
  }
  if (nl != nh) return lfail(c, HARP_E_INVALID_ARG, "SHRINK: %s%s", "lo and hi need the same length", NULL);
  return true;
}

/* FLIP: axes */
static bool arg_flip(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"axes", NULL};
  return ld_only_keys(c, arg, "FLIP arg", keys) && (v = req(c, arg, "axes")) &&
         ld_ints(c, v, "axes", out->flip.axes, &out->flip.n);
}

/* VIEW: result_shape, index_map */
static bool arg_view(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"result_shape", "index_map", NULL};
  return ld_only_keys(c, arg, "VIEW arg", keys) && (v = req(c, arg, "result_shape")) &&
         ld_shape(c, v, "result_shape", &out->view.shape) && (v = req(c, arg, "index_map")) &&
         ld_index_map(c, v, out->view.shape.rank, &out->view);
}

/* POOL: kernel, stride?, dilation? (one entry per kernel axis) */
static bool arg_pool(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"kernel", "stride", "dilation", NULL};
  tiny_arg_pool *p = &out->pool;
  int n2;
  if (!ld_only_keys(c, arg, "POOL arg", keys) || !(v = req(c, arg, "kernel")) || !ld_dims(c, v, "kernel", p->kernel, &p->n))
    return false;
  for (int i = 0; i < p->n; i++) p->stride[i] = p->dilation[i] = tiny_dim_int(1);
  if ((v = json_object_get(arg, "stride")) && (!ld_dims(c, v, "stride", p->stride, &n2) || n2 != p->n))
    return c->e->code ? false : lfail(c, HARP_E_INVALID_ARG, "POOL: %s%s", "stride needs one entry per kernel axis", NULL);
  if ((v = json_object_get(arg, "dilation")) && (!ld_dims(c, v, "dilation", p->dilation, &n2) || n2 != p->n))
    return c->e->code ? false : lfail(c, HARP_E_INVALID_ARG, "POOL: %s%s", "dilation needs one entry per kernel axis", NULL);
  return true;
}

/* CAST: to */
static bool arg_cast(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"to", NULL};
  return ld_only_keys(c, arg, "CAST arg", keys) && (v = req(c, arg, "to")) && ld_dtype(c, v, "to", &out->cast.to);
}

/* REDUCE: op (SUM, MAX, MIN), axes, dtype?, init? */
static bool arg_reduce(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"op", "axes", "dtype", "init", NULL};
  tiny_arg_reduce *r = &out->reduce;
  if (!ld_only_keys(c, arg, "REDUCE arg", keys) || !(v = req(c, arg, "op"))) return false;
  const char *s = json_is_string(v) ? json_string_value(v) : "";
  if (!strcmp(s, "SUM")) r->op = TINY_RSUM;
  else if (!strcmp(s, "MAX")) r->op = TINY_RMAX;
  else if (!strcmp(s, "MIN")) r->op = TINY_RMIN;
  else return lfail(c, HARP_E_INVALID_ARG, "%s: %s", "REDUCE op", "expected SUM, MAX or MIN");
  if (!(v = req(c, arg, "axes")) || !ld_dims(c, v, "axes", r->axes, &r->n)) return false;
  if ((v = json_object_get(arg, "dtype"))) {
    if (!ld_dtype(c, v, "dtype", &r->dtype)) return false;
    r->has_dtype = true;
  }
  if ((v = json_object_get(arg, "init"))) {
    if (!ld_number(c, v, "init", &r->init)) return false;
    r->has_init = true;
  }
  return true;
}

/* GATHER: axis */
static bool arg_gather(lctx *c, json_t *arg, tiny_args *out) {
  json_t *v;
  static const char *const keys[] = {"axis", NULL};
  if (!ld_only_keys(c, arg, "GATHER arg", keys) || !(v = req(c, arg, "axis"))) return false;
  if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= TINY_MAX_RANK)
    return lfail(c, HARP_E_INVALID_ARG, "%s: %s", "axis", "expected an axis index");
  out->gather.axis = (int)json_integer_value(v);
  return true;
}

typedef bool (*arg_reader)(lctx *c, json_t *arg, tiny_args *out);

/* The reader of each kind of arg (tiny_argkind), NULL for TA_NONE. */
static const arg_reader ARG_READERS[] = {
    [TA_INPUT] = arg_input,
    [TA_CONST] = arg_const,
    [TA_RESHAPE] = arg_reshape,
    [TA_PERMUTE] = arg_permute,
    [TA_EXPAND] = arg_expand,
    [TA_PAD] = arg_pad,
    [TA_SHRINK] = arg_shrink,
    [TA_FLIP] = arg_flip,
    [TA_VIEW] = arg_view,
    [TA_POOL] = arg_pool,
    [TA_CAST] = arg_cast,
    [TA_REDUCE] = arg_reduce,
    [TA_GATHER] = arg_gather,
};

bool ld_args(lctx *c, tiny_op op, json_t *arg, tiny_args *out) {
  memset(out, 0, sizeof *out);
  tiny_argkind k = tiny_op_argkind(op);
  if (k == TA_NONE) {
    if (arg && (!json_is_object(arg) || json_object_size(arg) > 0))
      return lfail(c, HARP_E_INVALID_ARG, "%s takes no arg%s", tiny_op_name(op), NULL);
    return true;
  }
  if (!arg || !json_is_object(arg)) return lfail(c, HARP_E_INVALID_ARG, "%s needs an \"arg\" object%s", tiny_op_name(op), NULL);
  if ((size_t)k >= sizeof ARG_READERS / sizeof *ARG_READERS || !ARG_READERS[k])
    return lfail(c, HARP_E_INTERNAL, "%s: no reader for its kind of arg%s", tiny_op_name(op), NULL);
  return ARG_READERS[k](c, arg, out);
}

/* ---- dependency order ---------------------------------------------------- */
harp_status ld_toposort(lctx *c, const ld_rec *recs, int n, int *order) {
  int *indeg = ut_xcalloc((size_t)n + 1, sizeof(int));
  int *users_start = ut_xcalloc((size_t)n + 2, sizeof(int));
  int *users = ut_xmalloc(sizeof(int) * ((size_t)n * TINY_MAX_SRC + 1));
  int *fill = ut_xcalloc((size_t)n + 1, sizeof(int));
  harp_status st = HARP_OK;
  if (!indeg || !users_start || !users || !fill) {
    st = ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto done;
  }
  /* CSR of users, then Kahn's algorithm; ties keep file order. */
  for (int i = 0; i < n; i++)
    for (int k = 0; k < recs[i].nsrc; k++)
      if (recs[i].src_rec[k] >= 0) users_start[recs[i].src_rec[k] + 1]++, indeg[i]++;
  for (int i = 0; i < n; i++) users_start[i + 1] += users_start[i];
  for (int i = 0; i < n; i++)
    for (int k = 0; k < recs[i].nsrc; k++) {
      int s = recs[i].src_rec[k];
      if (s >= 0) users[users_start[s] + fill[s]++] = i;
    }
  /* Ready nodes come out smallest file index first (a binary min-heap), so
   * a file already in dependency order keeps its order. */
  int *heap = fill, nheap = 0, tail = 0;
  for (int i = 0; i < n; i++)
    if (!indeg[i]) heap[nheap++] = i; /* ascending: already a heap */
  while (nheap > 0) {
    int i = heap[0];
    heap[0] = heap[--nheap];
    for (int k = 0;;) { /* sift down */
      int l = 2 * k + 1, m = k;
      if (l < nheap && heap[l] < heap[m]) m = l;
      if (l + 1 < nheap && heap[l + 1] < heap[m]) m = l + 1;
      if (m == k) break;
      int t = heap[k]; heap[k] = heap[m]; heap[m] = t;
      k = m;
    }
    order[tail++] = i;
    for (int u = users_start[i]; u < users_start[i + 1]; u++)
      if (--indeg[users[u]] == 0) {
        int k = nheap++; /* sift up */
        heap[k] = users[u];
        while (k > 0 && heap[(k - 1) / 2] > heap[k]) {
          int p = (k - 1) / 2, t = heap[k]; heap[k] = heap[p]; heap[p] = t;
          k = p;
        }
      }
  }
  if (tail < n)
    for (int i = 0; i < n; i++)
      if (indeg[i]) {
        st = ut_fail(c->e, HARP_E_CYCLE, recs[i].id, "the graph has a cycle through this node");
        break;
      }
done:
  free(indeg);
  free(users_start);
  free(users);
  free(fill);
  return st;
}

harp_status ld_add_sorted(lctx *c, ld_rec *recs, int n, int *rec_to_node) {
  int *order = ut_xmalloc(sizeof(int) * ((size_t)n + 1));
  if (!order) return ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  harp_status st = ld_toposort(c, recs, n, order);
  for (int t = 0; t < n && !st; t++) {
    ld_rec *r = &recs[order[t]];
    tiny_src src[TINY_MAX_SRC];
    for (int k = 0; k < r->nsrc; k++)
      src[k] = (tiny_src){r->src_rec[k] >= 0 ? rec_to_node[r->src_rec[k]] : -1, r->imm[k]};
    int idx = tiny_add(c->g, r->id, r->op, src, r->nsrc, tiny_op_argkind(r->op) == TA_NONE ? NULL : &r->args);
    if (idx < 0) {
      st = ut_fail(c->e, c->g->err.code, c->g->err.node, "%s", c->g->err.msg);
      break;
    }
    if (r->tag) c->g->nodes[idx].tag = ut_arena_strdup(c->g->arena, r->tag);
    rec_to_node[order[t]] = idx;
  }
  free(order);
  return st;
}

/* ---- canonical dialect ---------------------------------------------------- */
/* Pass 1 over the n uops: each record's id (recs[i].id), checked and
 * unique, entered in ids (only its id map is used) so sources can point
 * forward. */
static harp_status ld_ids(lctx *c, json_t *uops, size_t n, ld_rec *recs, tiny_graph *ids) {
  static const char *const node_keys[] = {"id", "uop", "src", "arg", "tag", NULL};
  for (size_t i = 0; i < n; i++) {
    json_t *u = json_array_get(uops, i);
    c->node = NULL;
    if (!json_is_object(u)) return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "uops[%zu] is %s, not an object", i, ut_json_kind(u));
    json_t *id = json_object_get(u, "id");
    if (!json_is_string(id) || !json_string_length(id) || json_string_length(id) > 120)
      return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "uops[%zu]: \"id\" must be a non-empty string of at most 120 bytes", i);
    recs[i].id = json_string_value(id);
    c->node = recs[i].id;
    if (!ld_only_keys(c, u, "node", node_keys)) return c->e->code;
    if (tiny_find(ids, recs[i].id) >= 0)
      return ut_fail(c->e, HARP_E_DUPLICATE_ID, recs[i].id, "node id \"%s\" is used twice", recs[i].id);
    tiny_arg_input dummy = {.tensor_id = "x"};
    if (tiny_add(ids, recs[i].id, TINY_INPUT, NULL, 0, &dummy) < 0) return ut_fail(c->e, ids->err.code, recs[i].id, "%s", ids->err.msg);
  }
  return HARP_OK;
}

/* Source k of record r from JSON value x: a node id of ids (r->src_rec[k]),
 * or an immediate (a number, or "inf" / "-inf" / "nan" as tiny_write_json
 * spells a non-finite one) in r->imm[k] with src_rec -1. */
static harp_status ld_source(lctx *c, const tiny_graph *ids, json_t *x, size_t k, ld_rec *r) {
  if (json_is_number(x)) {
    r->src_rec[k] = -1;
    r->imm[k] = json_number_value(x);
    return HARP_OK;
  }
  if (!json_is_string(x))
    return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "src[%zu] must be a node id or a number, got %s", k, ut_json_kind(x));
  const char *v = json_string_value(x);
  int idx = tiny_find(ids, v);
  r->src_rec[k] = idx;
  bool nonfinite = !strcmp(v, "inf") || !strcmp(v, "+inf") || !strcmp(v, "-inf") || !strcmp(v, "nan");
  if (idx >= 0) return HARP_OK;
  if (!nonfinite) return ut_fail(c->e, HARP_E_DANGLING, r->id, "source \"%s\" is not a node", v);
  double imm;
  ld_number(c, x, "src", &imm);
  r->imm[k] = imm;
  return HARP_OK;
}

/* Pass 2 for uop u into record r: its op, sources (ids: pass 1's), tag
 * and arg. */
static harp_status ld_node(lctx *c, json_t *u, const tiny_graph *ids, ld_rec *r) {
  c->node = r->id;
  json_t *op = json_object_get(u, "uop");
  int opi = json_is_string(op) ? tiny_op_parse(json_string_value(op)) : -1;
  if (opi < 0)
    return json_is_string(op) ? ut_fail(c->e, HARP_E_UNKNOWN_OP, r->id, "unknown uop \"%s\"", json_string_value(op))
                              : ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "\"uop\" must be a string");
  r->op = (tiny_op)opi;
  json_t *src = json_object_get(u, "src");
  if (src && !json_is_array(src)) return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "\"src\" must be an array");
  size_t ns = src ? json_array_size(src) : 0;
  int arity = tiny_op_arity(r->op);
  if (ns != (size_t)arity)
    return ut_fail(c->e, HARP_E_ARITY, r->id, "%s takes %d source%s, got %zu", tiny_op_name(r->op), arity,
                   arity == 1 ? "" : "s", ns);
  r->nsrc = (int)ns;
  for (size_t k = 0; k < ns; k++)
    if (ld_source(c, ids, json_array_get(src, k), k, r)) return c->e->code;
  json_t *tag = json_object_get(u, "tag");
  if (tag && !json_is_string(tag)) return ut_fail(c->e, HARP_E_INVALID_ARG, r->id, "\"tag\" must be a string");
  r->tag = tag ? json_string_value(tag) : NULL;
  return ld_args(c, r->op, json_object_get(u, "arg"), &r->args) ? HARP_OK : c->e->code;
}

/* The model's "outputs" (outs: NULL when absent) marked in c->g. */
static harp_status ld_outputs(lctx *c, json_t *outs) {
  if (!outs) return HARP_OK;
  c->node = NULL;
  if (!json_is_array(outs) || json_array_size(outs) == 0)
    return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "\"outputs\" must be a non-empty array of node ids");
  for (size_t k = 0; k < json_array_size(outs); k++) {
    json_t *o = json_array_get(outs, k);
    int idx = json_is_string(o) ? tiny_find(c->g, json_string_value(o)) : -1;
    if (idx < 0)
      return ut_fail(c->e, HARP_E_DANGLING, json_is_string(o) ? json_string_value(o) : NULL,
                     "output is not a node id of this model");
    if (tiny_mark_output(c->g, idx) < 0) return ut_fail(c->e, c->g->err.code, NULL, "%s", c->g->err.msg);
  }
  return HARP_OK;
}

harp_status ld_dsyms(lctx *c, json_t *d) {
  if (!d) return HARP_OK;
  c->node = NULL;
  if (!json_is_object(d))
    return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "\"derived\" must be an object of NAME: \"DEFINITION\", got %s", ut_json_kind(d));
  const char *name;
  json_t *def;
  json_object_foreach(d, name, def) { /* "NAME": "DEF", or {"def": "DEF", "exact": true} (tiny_dsym.exact) */
    json_t *x = json_is_object(def) ? json_object_get(def, "exact") : NULL, *text = json_is_object(def) ? json_object_get(def, "def") : def;
    if (!json_is_string(text) || (json_is_object(def) && (json_object_size(def) != 1u + !!x || (x && !json_is_boolean(x)))))
      return ut_fail(c->e, HARP_E_INVALID_ARG, NULL,
                     "derived symbol %s: its definition must be a string, or {\"def\": STRING, \"exact\": BOOL}", name);
    int k = tiny_dsym_add(c->g, name, json_string_value(text));
    if (k < 0) return ut_fail(c->e, c->g->err.code, NULL, "%s", c->g->err.msg);
    c->g->dsyms[k].exact = json_is_true(x);
  }
  return HARP_OK;
}

static harp_status load_uops(lctx *c, json_t *root) {
  static const char *const top_keys[] = {"uops", "outputs", "derived", "name", "comment", "meta", NULL};
  if (!ld_only_keys(c, root, "model", top_keys)) return c->e->code;
  json_t *uops = json_object_get(root, "uops");
  if (!json_is_array(uops)) return ut_fail(c->e, HARP_E_INVALID_ARG, NULL, "\"uops\" must be an array");
  size_t n = json_array_size(uops);
  if (n > TINY_MAX_NODES) return ut_fail(c->e, HARP_E_LIMIT, NULL, "more than %d nodes", TINY_MAX_NODES);
  ld_rec *recs = ut_xcalloc(n + 1, sizeof *recs);
  int *rec_to_node = ut_xcalloc(n + 1, sizeof(int));
  tiny_graph *ids = recs && rec_to_node ? tiny_graph_new() : NULL;
  harp_status st = ids ? ld_ids(c, uops, n, recs, ids) : ut_fail(c->e, HARP_E_NO_MEMORY, NULL, "out of memory");
  for (size_t i = 0; i < n && !st; i++) st = ld_node(c, json_array_get(uops, i), ids, &recs[i]);
  tiny_graph_free(ids);
  if (!st) st = ld_add_sorted(c, recs, (int)n, rec_to_node);
  if (!st) st = ld_outputs(c, json_object_get(root, "outputs"));
  if (!st) st = ld_dsyms(c, json_object_get(root, "derived"));
  free(recs);
  free(rec_to_node);
  return st;
}

/* Blank comments (outside strings) with spaces, keeping newlines. */
static void strip_comments(char *s, size_t len) {
  bool in_str = false;
  for (size_t i = 0; i < len; i++) {
    if (in_str) {
      if (s[i] == '\\' && i + 1 < len) i++;
      else if (s[i] == '"') in_str = false;
      continue;
    }
    if (s[i] == '"') in_str = true;
    else if (s[i] == '/' && i + 1 < len && s[i + 1] == '/') {
      while (i < len && s[i] != '\n') s[i++] = ' ';
    } else if (s[i] == '/' && i + 1 < len && s[i + 1] == '*') {
      s[i] = s[i + 1] = ' ';
      for (i += 2; i < len && !(s[i] == '*' && i + 1 < len && s[i + 1] == '/'); i++)
        if (s[i] != '\n') s[i] = ' ';
      if (i < len) s[i] = s[i + 1] = ' ', i++;
    }
  }
}

harp_status tiny_load_json(harp_error *e, const char *text, size_t len, const char *filename, tiny_graph **out) {
  *out = NULL;
  if (len > MAX_MODEL_BYTES) return ut_fail_at(e, HARP_E_LIMIT, filename, 0, 0, "model larger than 256 MiB");
  char *buf = ut_xmalloc(len + 1);
  if (!buf) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  memcpy(buf, text, len);
  buf[len] = 0;
  strip_comments(buf, len);
  json_error_t je;
  json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
  if (!root) {
    ut_fail_at(e, HARP_E_PARSE, filename, je.line, je.column, "invalid JSON: %s", je.text);
    memcpy(buf, text, len); /* the snippet from the text as given (text need not end in a NUL) */
    ut_error_set_snippet(e, buf, je.line, je.column);
    free(buf);
    return e->code;
  }
  free(buf);
  tiny_graph *g = tiny_graph_new();
  if (!g) {
    json_decref(root);
    return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  }
  lctx c = {e, g, filename, NULL};
  harp_status st;
  if (!json_is_object(root))
    st = ut_fail_at(e, HARP_E_INVALID_ARG, filename, 0, 0, "a model is a JSON object, got %s", ut_json_kind(root));
  else if (json_object_get(root, "uops"))
    st = load_uops(&c, root);
  else if (json_object_get(root, "ops"))
    st = tiny_load_ops_dialect(&c, root);
  else
    st = ut_fail_at(e, HARP_E_INVALID_ARG, filename, 0, 0, "a model needs \"uops\" (seed 001) or \"ops\" (seed 000)");
  json_decref(root);
  if (st) {
    if (!e->file[0] && filename) snprintf(e->file, sizeof e->file, "%s", filename);
    tiny_graph_free(g);
    return st;
  }
  *out = g;
  return HARP_OK;
}

harp_status tiny_load_file(harp_error *e, const char *path, tiny_graph **out) {
  char *text;
  size_t len;
  *out = NULL;
  if (ut_read_file(e, path, MAX_MODEL_BYTES, &text, &len)) return e->code;
  harp_status s = tiny_load_json(e, text, len, path, out);
  free(text);
  return s;
}
