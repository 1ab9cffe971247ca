/* test_ib_rules.c — the IndexBook update rules of seed 000 §1.3, one or more
 * table rows per rule: the axes, the step map (output axes -> input axes)
 * and the composed access down to the first non-movement node.  Expected
 * strings were derived by hand from the op semantics. */
#include <jansson.h>

#include "ibtest.h"

/* Models are written with ' for " to keep the table readable. */
#define IN(id, shape) "{'id':'" id "','uop':'INPUT','arg':{'tensor_id':'" id "','dtype':'fp32','shape':" shape "}}"

typedef struct rule_case {
  const char *name;
  const char *uops;  /* the "uops" list without brackets */
  const char *syms;  /* "A=1,B=2" or NULL (unbound symbols stay symbolic) */
  const char *node;  /* node to look at */
  int input;         /* which of its inputs */
  const char *axes;  /* expected axes ("i0:M i1:4/b" — /b: broadcast), or NULL */
  const char *step;  /* expected step map, or NULL */
  const char *acc;   /* expected composed access, or NULL */
} rule_case;

static const rule_case cases[] = {
    /* ---- leaf ---- */
    {"leaf symbolic", IN("x", "['M','K']") ",{'id':'y','uop':'RELU','src':['x']}", NULL, "x", 0, "i0:M i1:K", NULL, NULL},
    {"leaf bound keeps the symbol name", IN("x", "['M',3]") ",{'id':'y','uop':'RELU','src':['x']}", "M=5", "x", 0, "i0:M i1:3", NULL, NULL},
    /* ---- unary / cast: identity ---- */
    {"unary", IN("x", "['M','K']") ",{'id':'y','uop':'RELU','src':['x']}", NULL, "y", 0, "i0:M i1:K", "x[i0, i1]",
     "x[i0, i1]"},
    {"cast", IN("x", "[2,3]") ",{'id':'y','uop':'CAST','src':['x'],'arg':{'to':'fp16'}}", NULL, "y", 0, "i0:2 i1:3",
     "x[i0, i1]", "x[i0, i1]"},
    /* ---- binary: broadcast is the constant 0 component ---- */
    {"binary same shape", IN("a", "['M','N']") "," IN("b", "['M','N']") ",{'id':'y','uop':'ADD','src':['a','b']}",
     NULL, "y", 1, "i0:M i1:N", "b[i0, i1]", "b[i0, i1]"},
    {"binary broadcast: expand step", IN("a", "[4,3]") "," IN("b", "[3]") ",{'id':'y','uop':'ADD','src':['a','b']}",
     NULL, "y.bc1.expand", 0, "i0:4/b i1:3", "y.bc1.reshape[0, i1]", "b[i1]"},
    {"binary broadcast: composed", IN("a", "[4,3]") "," IN("b", "[3]") ",{'id':'y','uop':'ADD','src':['a','b']}", NULL,
     "y", 1, "i0:4 i1:3", NULL, "b[i1]"},
    {"binary by symbol name", IN("s", "['B','M','N']") "," IN("r", "['B','M']") ",{'id':'y','uop':'SUB','src':['s','r']}",
     NULL, "y", 1, "i0:B i1:M i2:N", NULL, "r[i0, i1]"},
    /* ---- permute ---- */
    {"permute", IN("x", "['A','B','C']") ",{'id':'y','uop':'PERMUTE','src':['x'],'arg':{'perm':[2,0,1]}}", NULL, "y", 0,
     "i0:C i1:A i2:B", "x[i1, i2, i0]", "x[i1, i2, i0]"},
    /* ---- reshape: linearize, decompose with floordiv / mod ---- */
    {"reshape split", IN("x", "[6]") ",{'id':'y','uop':'RESHAPE','src':['x'],'arg':{'result_shape':[2,3]}}", NULL, "y", 0,
     "i0:2 i1:3", "x[3*i0 + i1]", NULL},
    {"reshape merge (mod + guard)", IN("x", "[2,3]") ",{'id':'y','uop':'RESHAPE','src':['x'],'arg':{'result_shape':[6]}}",
     NULL, "y", 0, "i0:6", "x[(i0) floordiv 3, (i0) mod 3]", NULL},
    {"reshape unit axes, symbolic", IN("x", "['M','K']") ",{'id':'y','uop':'RESHAPE','src':['x'],'arg':{'result_shape':['M',1,'K']}}",
     NULL, "y", 0, "i0:M i1:1 i2:K", "x[i0, i2]", NULL},
    {"reshape symbolic outer axis", IN("x", "['M',2,3]") ",{'id':'y','uop':'RESHAPE','src':['x'],'arg':{'result_shape':['M',6]}}",
     NULL, "y", 0, "i0:M i1:6", "x[i0, (i1) floordiv 3, (i1) mod 3]", NULL},
    {"reshape regroup [4,6]->[24]->[2,12]",
     IN("x", "[4,6]") ",{'id':'a','uop':'RESHAPE','src':['x'],'arg':{'result_shape':[24]}}"
                      ",{'id':'y','uop':'RESHAPE','src':['a'],'arg':{'result_shape':[2,12]}}",
     NULL, "y", 0, "i0:2 i1:12", "a[12*i0 + i1]", "x[2*i0 + (i1) floordiv 6, (i1) mod 6]"},
    {"reshape round trip composes to the identity",
     IN("x", "[2,3,4]") ",{'id':'a','uop':'RESHAPE','src':['x'],'arg':{'result_shape':[6,4]}}"
                        ",{'id':'b','uop':'RESHAPE','src':['a'],'arg':{'result_shape':[24]}}"
                        ",{'id':'y','uop':'RESHAPE','src':['b'],'arg':{'result_shape':[2,3,4]}}",
     NULL, "y", 0, "i0:2 i1:3 i2:4", NULL, "x[i0, i1, i2]"},
    {"reshape of a transpose (common factor)",
     IN("x", "[4,8]") ",{'id':'t','uop':'PERMUTE','src':['x'],'arg':{'perm':[1,0]}}"
                      ",{'id':'y','uop':'RESHAPE','src':['t'],'arg':{'result_shape':[2,16]}}",
     NULL, "y", 0, "i0:2 i1:16", "t[4*i0 + (i1) floordiv 4, (i1) mod 4]", "x[(i1) mod 4, 4*i0 + (i1) floordiv 4]"},
    /* ---- expand ---- */
    {"expand", IN("x", "[1,'K']") ",{'id':'y','uop':'EXPAND','src':['x'],'arg':{'result_shape':['M','K']}}", NULL, "y", 0,
     "i0:M/b i1:K", "x[0, i1]", "x[0, i1]"},
    {"expand with broadcast_dimensions (XLA)",
     IN("x", "['N']") ",{'id':'y','uop':'EXPAND','src':['x'],'arg':{'result_shape':['M','N'],'broadcast_dimensions':[1]}}",
     NULL, "y", 0, "i0:M/b i1:N", NULL, "x[i1]"},
    /* ---- shrink, with step ---- */
    {"shrink", IN("x", "[10,5]") ",{'id':'y','uop':'SHRINK','src':['x'],'arg':{'lo':[2,0],'hi':[7,5]}}", NULL, "y", 0,
     "i0:5 i1:5", "x[i0 + 2, i1]", NULL},
    {"shrink with step", IN("x", "[10]") ",{'id':'y','uop':'SHRINK','src':['x'],'arg':{'lo':[1],'hi':[9],'step':[3]}}", NULL,
     "y", 0, "i0:3", "x[3*i0 + 1]", NULL},
    /* ---- pad: the centre as identity, the outside as fill pieces ---- */
    {"pad", IN("x", "[4]") ",{'id':'y','uop':'PAD','src':['x'],'arg':{'pad':[[1,2]],'value':0}}", NULL, "y", 0, "i0:7",
     "x[i0 - 1] : i0 - 1 >= 0, 4 - i0 >= 0 | fill(0) : -i0 >= 0 | fill(0) : i0 - 5 >= 0", NULL},
    {"pad two axes, disjoint pieces",
     IN("x", "[2,3]") ",{'id':'y','uop':'PAD','src':['x'],'arg':{'pad':[[1,0],[0,1]],'value':-1}}", NULL, "y", 0,
     "i0:3 i1:4",
     "x[i0 - 1, i1] : i0 - 1 >= 0, 2 - i1 >= 0 | fill(-1) : -i0 >= 0 | fill(-1) : i0 - 1 >= 0, i1 - 3 >= 0", NULL},
    {"pad with symbolic amounts", IN("x", "['H']") ",{'id':'y','uop':'PAD','src':['x'],'arg':{'pad':[['pt','pb']]}}", NULL,
     "y", 0, "i0:H + pb + pt", "x[i0 - pt] : i0 - pt >= 0, H + pt - i0 - 1 >= 0 | fill(0) : pt - i0 - 1 >= 0 | fill(0) : i0 - H - pt >= 0", NULL},
    {"pad then shrink away the padding",
     IN("x", "[4]") ",{'id':'p','uop':'PAD','src':['x'],'arg':{'pad':[[1,1]]}}"
                    ",{'id':'y','uop':'SHRINK','src':['p'],'arg':{'lo':[1],'hi':[5]}}",
     NULL, "y", 0, "i0:4", NULL, "x[i0]"},
    {"pad then shrink keeps one side",
     IN("x", "[4]") ",{'id':'p','uop':'PAD','src':['x'],'arg':{'pad':[[2,2]],'value':7}}"
                    ",{'id':'y','uop':'SHRINK','src':['p'],'arg':{'lo':[0],'hi':[5]}}",
     NULL, "y", 0, "i0:5", NULL, "x[i0 - 2] : i0 - 2 >= 0 | fill(7) : 1 - i0 >= 0"},
    /* ---- flip: D-1-i ---- */
    {"flip", IN("x", "[3,'M']") ",{'id':'y','uop':'FLIP','src':['x'],'arg':{'axes':[1]}}", NULL, "y", 0, "i0:3 i1:M",
     "x[i0, M - i1 - 1]", NULL},
    {"flip twice is the identity",
     IN("x", "[5]") ",{'id':'a','uop':'FLIP','src':['x'],'arg':{'axes':[0]}}"
                    ",{'id':'y','uop':'FLIP','src':['a'],'arg':{'axes':[0]}}",
     NULL, "y", 0, NULL, "a[4 - i0]", "x[i0]"},
    /* ---- view (general affine re-map), mod expanded with its guard ---- */
    {"view", IN("x", "[12]") ",{'id':'y','uop':'VIEW','src':['x'],'arg':{'result_shape':[3,4],'index_map':['4*i0 + i1']}}",
     NULL, "y", 0, "i0:3 i1:4", "x[4*i0 + i1]", NULL},
    {"view with mod", IN("x", "[4,3]") ",{'id':'y','uop':'VIEW','src':['x'],'arg':{'result_shape':[12],'index_map':['i0 floordiv 3','i0 % 3']}}",
     NULL, "y", 0, "i0:12", "x[(i0) floordiv 3, (i0) mod 3]", NULL},
    {"view mod that simplifies away",
     IN("x", "[4]") ",{'id':'y','uop':'VIEW','src':['x'],'arg':{'result_shape':[2,2],'index_map':['(2*i0 + i1) % 4']}}",
     NULL, "y", 0, NULL, "x[2*i0 + i1]", NULL},
    /* ---- pool: stride*o + dilation*k ---- */
    {"pool (normalized to a view)", IN("x", "[2,9]") ",{'id':'y','uop':'POOL','src':['x'],'arg':{'kernel':[3],'stride':[2],'dilation':[2]}}",
     NULL, "y", 0, "i0:2 i1:3 i2:3", "x[i0, 2*i1 + 2*i2]", NULL},
    {"pool on a symbolic axis", IN("x", "['N','W']") ",{'id':'y','uop':'POOL','src':['x'],'arg':{'kernel':['K'],'stride':[2]}}",
     NULL, "y", 0, "i0:N i1:(W - K) floordiv 2 + 1 i2:K", "x[i0, 2*i1 + i2]", NULL},
    {"pad + pool: a padded window",
     IN("x", "[5]") ",{'id':'p','uop':'PAD','src':['x'],'arg':{'pad':[[1,1]]}}"
                    ",{'id':'y','uop':'POOL','src':['p'],'arg':{'kernel':[3],'stride':[2]}}",
     NULL, "y", 0, "i0:3 i1:3", "p[2*i0 + i1]", "x[2*i0 + i1 - 1] : 2*i0 + i1 - 1 >= 0, 5 - 2*i0 - i1 >= 0 | fill(0) : -2*i0 - i1 >= 0 | fill(0) : 2*i0 + i1 - 6 >= 0"},
    /* ---- reduce: axes removed, renumbered, recorded ---- */
    {"reduce", IN("x", "['M','K','N']") ",{'id':'y','uop':'REDUCE','src':['x'],'arg':{'op':'SUM','axes':['K'],'dtype':'fp32'}}",
     NULL, "y", 0, "i0:M i1:N r0:K", "x[i0, r0, i1]", "x[i0, r0, i1]"},
    {"reduce two axes", IN("x", "[2,3,4,5]") ",{'id':'y','uop':'REDUCE','src':['x'],'arg':{'op':'MAX','axes':[3,1],'dtype':'fp32'}}",
     NULL, "y", 0, "i0:2 i1:4 r0:3 r1:5", "x[i0, r0, i1, r1]", NULL},
    {"reduce reads through a view",
     IN("x", "['M','K']") ",{'id':'t','uop':'PERMUTE','src':['x'],'arg':{'perm':[1,0]}}"
                          ",{'id':'y','uop':'REDUCE','src':['t'],'arg':{'op':'SUM','axes':[0],'dtype':'fp32'}}",
     NULL, "y", 0, "i0:M r0:K", "t[r0, i0]", "x[i0, r0]"},
    /* ---- gather: data-dependent, NonScop ---- */
    {"gather", IN("x", "[4,3]") ",{'id':'i','uop':'INPUT','arg':{'tensor_id':'i','dtype':'i32','shape':[2,3]}}"
                                ",{'id':'y','uop':'GATHER','src':['x','i'],'arg':{'axis':0}}",
     NULL, "y", 0, "i0:2 i1:3", "x[data-dependent]", "x[data-dependent]"},
};

static bool check_case(const rule_case *c) {
  const char *syms[16] = {0};
  char *sbuf = c->syms ? strdup(c->syms) : NULL;
  int ns = 0;
  for (char *p = sbuf ? strtok(sbuf, ",") : NULL; p && ns < 15; p = strtok(NULL, ",")) syms[ns++] = p;
  ibt t;
  harp_status s = ibt_load_uops(&t, c->uops, syms);
  free(sbuf);
  if (!s) s = ib_validate(&t.e, t.ib);
  if (s) {
    char buf[2048];
    harp_error_format(&t.e, buf, sizeof buf);
    print_message("%s: %s\n", c->name, buf);
    ibt_free(&t);
    return false;
  }
  char what[256];
  bool ok = true;
  if (c->axes) snprintf(what, sizeof what, "%s: axes", c->name), ok &= check_str(what, ibt_axes(&t, c->node), c->axes);
  if (c->step)
    snprintf(what, sizeof what, "%s: step map", c->name),
        ok &= check_str(what, ibt_access(&t, c->node, c->input, false), c->step);
  if (c->acc)
    snprintf(what, sizeof what, "%s: composed access", c->name),
        ok &= check_str(what, ibt_access(&t, c->node, c->input, true), c->acc);
  ibt_free(&t);
  return ok;
}

static void test_rule_table(void **state) {
  (void)state;
  int bad = 0, n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) bad += !check_case(&cases[i]);
  if (bad) fail_msg("%d of %d rule cases differ", bad, n);
}

/* Each rule's extra records: reduce_axes, broadcast kind, mod guards,
 * NonScop, via lists. */
static void test_records(void **state) {
  (void)state;
  ibt t;
  const char *json = "{\"uops\":["
                     "{\"id\":\"x\",\"uop\":\"INPUT\",\"arg\":{\"tensor_id\":\"x\",\"dtype\":\"fp32\",\"shape\":[2,3,4]}},"
                     "{\"id\":\"r\",\"uop\":\"RESHAPE\",\"src\":[\"x\"],\"arg\":{\"result_shape\":[6,4]}},"
                     "{\"id\":\"y\",\"uop\":\"REDUCE\",\"src\":[\"r\"],\"arg\":{\"op\":\"SUM\",\"axes\":[0],\"dtype\":\"fp32\"}}]}";
  assert_ok(&t.e, ibt_load(&t, json, NULL));
  const ib_info *y = ib_get(t.ib, ibt_node(&t, "y")), *r = ib_get(t.ib, ibt_node(&t, "r")),
                *x = ib_get(t.ib, ibt_node(&t, "x"));
  /* reduce_axes: the removed axis keeps the id of r's axis 0 (a merge of x's 0,1: fresh) */
  assert_int_equal(y->nred, 1);
  assert_int_equal(y->red[0].id, r->axes[0].id);
  assert_int_equal(y->red[0].kind, IB_REDUCE);
  assert_int_equal(y->axes[0].id, r->axes[1].id); /* kept axis renumbered i0, same id */
  assert_string_equal(y->axes[0].name, "i0");
  assert_int_equal(r->axes[1].id, x->axes[2].id); /* the 4-axis passes through the reshape */
  assert_int_not_equal(r->axes[0].id, x->axes[0].id);
  /* r decomposes its axis 0 with a mod: one guard, validated */
  assert_int_equal(r->nmods, 1);
  assert_int_equal(r->ncons, 2 * r->nvars + 2);
  /* the REDUCE's composed access passes r */
  assert_int_equal(y->acc[0].src, ibt_node(&t, "x"));
  assert_int_equal(y->acc[0].nvia, 1);
  assert_int_equal(y->acc[0].via[0], ibt_node(&t, "r"));
  assert_null(y->non_scop);
  ibt_free(&t);
}

static void test_json_dump(void **state) {
  (void)state;
  ibt t;
  assert_ok(&t.e, ibt_load_file(&t, "tests/models/seed001_gemm.json", NULL));
  char *j = NULL;
  assert_ok(&t.e, ib_dump_json(&t.e, t.ib, &j));
  json_error_t err;
  json_t *root = json_loads(j, 0, &err);
  free(j);
  assert_non_null(root);
  json_t *vals = json_object_get(json_object_get(root, "indexbook"), "values");
  json_t *n8 = json_object_get(vals, "n8");
  assert_non_null(n8);
  assert_string_equal(json_string_value(json_object_get(n8, "op")), "REDUCE");
  json_t *red = json_object_get(n8, "reduced");
  assert_int_equal(json_array_size(red), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(red, 0), "size")), "K");
  assert_int_equal(json_array_size(json_object_get(n8, "reduce_axes")), 1);
  json_t *acc = json_array_get(json_object_get(json_object_get(vals, "n7"), "access"), 1);
  assert_string_equal(json_string_value(json_object_get(acc, "base")), "n1");
  json_t *map = json_object_get(acc, "map");
  assert_string_equal(json_string_value(json_array_get(map, 0)), "i2");
  assert_string_equal(json_string_value(json_array_get(map, 1)), "i1");
  assert_true(json_is_null(json_object_get(json_object_get(json_object_get(root, "indexbook"), "symbols"), "K")));
  json_decref(root);
  ibt_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rule_table),
      cmocka_unit_test(test_records),
      cmocka_unit_test(test_json_dump),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
