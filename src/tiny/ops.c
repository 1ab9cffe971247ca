/* ops.c — the op table's lookups: the class questions passes ask of an op
 * and the renderers' text of it.
 * Needs: harp/tiny_ops.h (the table).  Gives: tiny_op_* and tiny_op_spell. */
#include <string.h>

#include "harp/tiny.h"
#include "tiny_spell.h"

/* The columns other than the interpreter's (interp.c expands those). */
typedef struct op_row {
  const char *name;
  tiny_class cls;
  tiny_argkind arg;
  unsigned dtype;
  tiny_epi epi;
  const char *c, *c_int, *gpu, *gpu_int, *cuda, *vec;
} op_row;

static const op_row rows[] = {
#define ROW(e, cls, arg, dt, epi, f32, i32, c, ci, g, gi, cu, v) {#e, cls, arg, dt, epi, c, ci, g, gi, cu, v},
    TINY_OPS(ROW)
#undef ROW
};

static const op_row *row(tiny_op op) { return (unsigned)op < TINY_OP_COUNT ? &rows[op] : &rows[TINY_INPUT]; }

const char *tiny_op_name(tiny_op op) { return (unsigned)op < TINY_OP_COUNT ? rows[op].name : "?"; }
tiny_class tiny_op_class(tiny_op op) { return row(op)->cls; }
tiny_argkind tiny_op_argkind(tiny_op op) { return row(op)->arg; }
unsigned tiny_op_dtype_rule(tiny_op op) { return row(op)->dtype; }
bool tiny_op_is_compare(tiny_op op) { return (row(op)->dtype & TD_BOOL) != 0; }
tiny_epi tiny_op_epi(tiny_op op) { return row(op)->epi; }

bool tiny_op_is_elementwise(tiny_op op) {
  tiny_class c = tiny_op_class(op);
  return c == TC_UNARY || c == TC_BINARY || c == TC_TERNARY;
}

int tiny_op_arity(tiny_op op) {
  switch (tiny_op_class(op)) {
  case TC_LEAF: return 0;
  case TC_BINARY: return 2;
  case TC_TERNARY: return 3;
  case TC_GATHER: return 2;
  default: return 1;
  }
}

int tiny_op_parse(const char *s) {
  if (!s) return -1;
  for (int i = 0; i < TINY_OP_COUNT; i++)
    if (strcmp(s, rows[i].name) == 0) return i;
  return -1;
}

/* An empty column is the one it falls back to: c_int and gpu to c, gpu_int
 * to c_int, cuda to c. */
const char *tiny_op_c(tiny_op op, bool in_int, bool gpu) {
  const op_row *r = row(op);
  const char *t = in_int && r->c_int ? r->c_int : r->c;
  if (gpu && in_int && r->gpu_int) t = r->gpu_int;
  if (gpu && !in_int && r->gpu) t = r->gpu;
  return t;
}

const char *tiny_op_cuda(tiny_op op) { return row(op)->cuda ? row(op)->cuda : row(op)->c; }
const char *tiny_op_vec(tiny_op op) { return row(op)->vec; }

void tiny_op_spell(ut_str *o, const char *tmpl, const char *const *x, int n) {
  int k = 0;
  const char *p = tmpl;
  while (*p) {
    const char *pc = strchr(p, '%');
    if (!pc) {
      ut_str_puts(o, p);
      return;
    }
    ut_str_putn(o, p, (size_t)(pc - p));
    if (pc[1] == 's') {
      ut_str_puts(o, n > 0 ? x[k < n ? k : n - 1] : "");
      k++;
      p = pc + 2;
    } else {
      ut_str_putc(o, '%');
      p = pc + (pc[1] == '%' ? 2 : 1);
    }
  }
}

const char *tiny_class_name(tiny_class c) {
  static const char *const n[] = {"leaf", "movement", "unary", "binary", "ternary", "reduce", "cast", "gather"};
  return (unsigned)c < sizeof n / sizeof n[0] ? n[c] : "?";
}

const char *tiny_epi_name(tiny_epi k) {
  static const char *const n[] = {"none", "relu", "gelu", "rint", "shift", "scale", "lower", "upper"};
  return (unsigned)k < sizeof n / sizeof n[0] ? n[k] : "?";
}
