/* cmd_ops.c — harp ops: the op table (harp/tiny_ops.h) as the passes read
 * it, one uop a line, or as JSON (--json) for tests and tools.
 * Needs: the op table's lookups.  Gives: cmd_ops. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tiny/tiny_spell.h"

/* The dtype rule of op as words: "any", "not bool" or "float", then "-> bool" for a comparison. */
static void rule_text(tiny_op op, char *buf, size_t cap) {
  unsigned r = tiny_op_dtype_rule(op);
  snprintf(buf, cap, "%s%s", r & TD_FLOAT ? "float" : r & TD_NUM ? "not bool" : "any", r & TD_BOOL ? " -> bool" : "");
}

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

/* One op as a JSON object: its facts and its renderers' text (null: none). */
static json_t *op_json(tiny_op op) {
  char rule[32];
  rule_text(op, rule, sizeof rule);
  bool ew = tiny_op_is_elementwise(op);
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string(tiny_op_name(op)));
  json_object_set_new(o, "class", json_string(tiny_class_name(tiny_op_class(op))));
  json_object_set_new(o, "arity", json_integer(tiny_op_arity(op)));
  json_object_set_new(o, "elementwise", json_boolean(ew));
  json_object_set_new(o, "float_only", json_boolean(tiny_op_dtype_rule(op) & TD_FLOAT));
  json_object_set_new(o, "not_bool", json_boolean(tiny_op_dtype_rule(op) & (TD_NUM | TD_FLOAT)));
  json_object_set_new(o, "compare", json_boolean(tiny_op_is_compare(op)));
  json_object_set_new(o, "dtype_rule", json_string(ew ? rule : ""));
  json_object_set_new(o, "epilogue", json_string(tiny_epi_name(tiny_op_epi(op))));
  json_object_set_new(o, "c", str_or_null(ew ? tiny_op_c(op, false, false) : NULL));
  json_object_set_new(o, "cuda", str_or_null(ew ? tiny_op_cuda(op) : NULL));
  json_object_set_new(o, "vec", str_or_null(tiny_op_vec(op)));
  return o;
}

static int print_json(void) {
  json_t *a = json_array();
  for (int i = 0; i < TINY_OP_COUNT; i++) json_array_append_new(a, op_json((tiny_op)i));
  char *s = json_dumps(a, JSON_INDENT(1));
  json_decref(a);
  if (!s) return 2;
  puts(s);
  free(s);
  return 0;
}

/* One line per op; the last column: the renderers the row gives text for
 * (an op that is not elementwise has rules of its own in each pass). */
static void print_table(void) {
  printf("%-8s %-9s %-5s %-16s %-8s %s\n", "OP", "CLASS", "ARITY", "DTYPES", "EPILOGUE", "TEXT FOR");
  for (int i = 0; i < TINY_OP_COUNT; i++) {
    tiny_op op = (tiny_op)i;
    char rule[32] = "-";
    bool ew = tiny_op_is_elementwise(op);
    if (ew) rule_text(op, rule, sizeof rule);
    tiny_epi k = tiny_op_epi(op);
    printf("%-8s %-9s %-5d %-16s %-8s %s%s\n", tiny_op_name(op), tiny_class_name(tiny_op_class(op)), tiny_op_arity(op), rule,
           k == TE_NONE ? "-" : tiny_epi_name(k), ew ? "c cuda" : "-", tiny_op_vec(op) ? " vector" : "");
  }
}

int cmd_ops(int argc, char **argv) {
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: harp ops [--json]\n\nThe Tiny uops, one row of the op table (include/harp/tiny_ops.h) each:\n"
             "class, arity, the dtypes an elementwise op takes, the epilogue step it can be, and the renderers\n"
             "that spell it.  --json: every column, the renderers' text included.\n");
      return 0;
    } else
      return cli_usage_error("ops", "unknown option '%s'", argv[i]);
  }
  if (json) return print_json();
  print_table();
  return 0;
}
