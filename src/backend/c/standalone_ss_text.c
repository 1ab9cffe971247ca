/* standalone_ss_text.c — the text of a ShapeSet package (harp compile
 * --shapeset) besides model_shapes.c: the ShapeSet part of model.h, a
 * main.c that runs the model at the binding its inputs' shapes give, and
 * the package's README.md.
 * Needs: standalone.c (the .npy helpers of main.c).
 * Gives: cgen_ss_header, cgen_ss_main, cgen_ss_readme. */
#include <inttypes.h>
#include <string.h>

#include "standalone.h"

void cgen_ss_header(ut_str *o) {
  static const char endif[] = "#endif\n";
  if (o->len >= sizeof endif - 1 && !strcmp(o->buf + o->len - (sizeof endif - 1), endif)) o->len -= sizeof endif - 1;
  ut_str_puts(o,
              "/* A ShapeSet package (harp compile --shapeset NAME=LO..HI): model.c serves every\n"
              " * binding of the box's symbols.  model_input_shapes / model_output_shapes\n"
              " * and model_required_memory() are those of the box's upper corner;\n"
              " * model_run runs at that corner.  An instance's arena is the upper corner's\n"
              " * bytes, every page touched at its first run (a binding lays out\n"
              " * model_required_memory_at of them); where those bytes cannot be had it grows to\n"
              " * the binding's (2 from a run when that allocation fails).  At any binding\n"
              " * syms[0..model_num_symbols()), in model_symbol_names' order:\n"
              " *\n"
              " *   model_bind_inputs(shapes, syms, why, cap)   the binding the input shapes\n"
              " *       give ({rank, d0, ...} each), checked: 0, or MODEL_E_BINDING with why[]\n"
              " *   model_output_shape_at(syms, k, shape)       output k's shape there\n"
              " *   model_run_shape(m, syms, inputs, outputs)   one run there\n"
              " *\n"
              " * A binding outside the box (model_symbol_lo..hi), or one that breaks the\n"
              " * model (a Reshape that no longer divides, sizes an element-wise op needs\n"
              " * equal), is MODEL_E_BINDING before any kernel runs; model_check_binding\n"
              " * says why. */\n"
              "#define MODEL_E_BINDING 99\n"
              "int model_num_symbols(void);\n"
              "extern const char *const model_symbol_names[]; /* NULL-terminated */\n"
              "extern const long long model_symbol_lo[], model_symbol_hi[];\n"
              "int model_check_binding(const long long *syms, char *why, size_t cap);\n"
              "int model_bind_inputs(const long *const *shapes, long long *syms, char *why, size_t cap);\n"
              "/* shape: {rank, d0, ...} (13 longs); -1 for no such k, else as model_check_binding */\n"
              "int model_input_shape_at(const long long *syms, int k, long *shape);\n"
              "int model_output_shape_at(const long long *syms, int k, long *shape);\n"              "/* the arena's bytes at the binding (0: refused); at most model_required_memory() */\n"
              "size_t model_required_memory_at(const long long *syms);\n"
              "int model_run_shape(model_t *m, const long long *syms, const void *const *inputs, void *const *outputs);\n\n"
              "#endif\n");
}

/* read_npy of the ShapeSet main.c: any shape, read into shape[]. */
static void npy_any(ut_str *o) {
  ut_str_puts(o, "/* Read a C-order .npy of dtype dt (bf16: from float32), its shape into shape. */\n"
                 "static void *read_npy(const char *path, const char *dt, long *shape) {\n");
  cgen_standalone_npy_open(o);
  ut_str_puts(o, "  const char *p = strstr(h, \"'shape': (\");\n"
                 "  shape[0] = 0;\n"
                 "  for (p = p ? p + 10 : \"\"; *p >= '0' && *p <= '9' && shape[0] < 12;) {\n"
                 "    char *end;\n    shape[1 + shape[0]++] = strtol(p, &end, 10);\n"
                 "    for (p = end; *p == ',' || *p == ' ';) p++;\n  }\n"
                 "  if (*p != ')') { fprintf(stderr, \"%s: cannot read its shape\\n\", path); free(h); fclose(f); return NULL; }\n"
                 "  free(h);\n");
  cgen_standalone_npy_data(o);
}

void cgen_ss_main(ut_str *o) {
  ut_str_puts(o, "/* main.c — runs the model at the binding the shapes of inputs/<name>.npy\n"
                 " * give (any binding in the compiled ShapeSet) with weights.bin, and writes\n"
                 " * outputs/<name>.npy.  A binding outside it: the reason, exit status 2,\n"
                 " * no output written.  Usage: ./model_main [DIR]  (DIR defaults to .) */\n"
                 "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <sys/stat.h>\n\n"
                 "#include \"model.h\"\n\n");
  cgen_standalone_npy_common(o);
  npy_any(o);
  cgen_standalone_npy_write(o);
  ut_str_puts(o,
              "int main(int argc, char **argv) {\n"
              "  const char *dir = argc > 1 ? argv[1] : \".\";\n"
              "  char path[4096], why[512];\n"
              "  int ni = model_num_inputs(), no = model_num_outputs(), ns = model_num_symbols();\n"
              "  void **in = calloc((size_t)ni + 1, sizeof *in), **out = calloc((size_t)no + 1, sizeof *out);\n"
              "  long(*shape)[13] = calloc((size_t)(ni + no) + 1, sizeof *shape);\n"
              "  const long **ishape = calloc((size_t)ni + 1, sizeof *ishape);\n"
              "  long long *syms = calloc((size_t)ns + 1, sizeof *syms);\n"
              "  if (!in || !out || !shape || !ishape || !syms) { fprintf(stderr, \"out of memory\\n\"); return 1; }\n"
              "  for (int k = 0; k < ni; k++) {\n"
              "    snprintf(path, sizeof path, \"%s/inputs/%s.npy\", dir, model_input_names[k]);\n"
              "    if (!(in[k] = read_npy(path, model_input_dtypes[k], shape[k]))) return 1;\n"
              "    ishape[k] = shape[k];\n  }\n"
              "  /* the binding, checked before anything runs */\n"
              "  if (model_bind_inputs(ishape, syms, why, sizeof why)) { fprintf(stderr, \"%s: %s\\n\", dir, why); return 2; }\n"
              "  size_t pb = model_params_bytes();\n"
              "  void *weights = pb ? malloc(pb) : NULL;\n"
              "  snprintf(path, sizeof path, \"%s/weights.bin\", dir);\n"
              "  FILE *wf = pb ? fopen(path, \"rb\") : NULL;\n"
              "  if (pb && (!wf || !weights || fread(weights, 1, pb, wf) != pb)) { fprintf(stderr, \"cannot read %s\\n\", path); return 1; }\n"
              "  if (wf) fclose(wf);\n"
              "  model_t *m = model_init(weights, pb);\n"
              "  if (!m) { fprintf(stderr, \"model_init failed\\n\"); return 1; }\n"
              "  for (int k = 0; k < no; k++) {\n"
              "    long *os = shape[ni + k];\n"
              "    if (model_output_shape_at(syms, k, os)) { fprintf(stderr, \"no shape for output %d\\n\", k); return 1; }\n"
              "    if (!(out[k] = calloc(count(os) + 1, dtype_size(model_output_dtypes[k])))) { fprintf(stderr, \"out of memory\\n\"); return 1; }\n"
              "  }\n"
              "  int rc = model_run_shape(m, syms, (const void *const *)in, out);\n"
              "  if (rc) { fprintf(stderr, \"model_run_shape failed: %d\\n\", rc); return 1; }\n"
              "  printf(\"binding:\");\n"
              "  for (int i = 0; i < ns; i++) printf(\" %s=%lld\", model_symbol_names[i], syms[i]);\n"
              "  printf(\"\\narena: %zu bytes (the upper corner's: %zu)\\n\", model_required_memory_at(syms), model_required_memory());\n"
              "  snprintf(path, sizeof path, \"%s/outputs\", dir);\n  mkdir(path, 0755);\n"
              "  for (int k = 0; k < no; k++) {\n"
              "    snprintf(path, sizeof path, \"%s/outputs/%s.npy\", dir, model_output_names[k]);\n"
              "    if (write_npy(path, model_output_dtypes[k], shape[ni + k], out[k])) {\n"
              "      fprintf(stderr, \"cannot write %s\\n\", path); return 1; }\n"
              "    printf(\"%s -> %s\\n\", model_output_names[k], path);\n  }\n"
              "  for (int k = 0; k < ni; k++) free(in[k]);\n  for (int k = 0; k < no; k++) free(out[k]);\n"
              "  free(in);\n  free(out);\n  free(shape);\n  free(ishape);\n  free(syms);\n  free(weights);\n"
              "  model_free(m);\n  return 0;\n}\n");
}

void cgen_ss_readme(const cgen_ss *s, ut_str *o) {
  ut_str_puts(o, "# A ShapeSet package written by `harp compile --shapeset`\n\n"
                 "One compiled model (`model.c`) serves every binding of these shape symbols:\n\n"
                 "| symbol | from | to |\n|---|---|---|\n");
  for (int i = 0; i < s->nbase; i++) {
    char safe[96];
    ut_sanitize_name(s->gen[i], safe, sizeof safe);
    ut_str_printf(o, "| %s | %" PRId64 " | %" PRId64 " |\n", safe, s->lo[i], s->hi[i]);
  }
  ut_str_puts(o, "\n`make` builds `model_main` with a plain C compiler and runs it: it reads\n"
                 "`inputs/<name>.npy` of any shape in that box, writes `outputs/<name>.npy`\n"
                 "at that shape, and prints the binding.  `expected/` holds what harp computed\n"
                 "for the example inputs.  Inputs whose shapes fall outside the box, or break\n"
                 "the model (a Reshape that no longer divides, sizes that must agree), are\n"
                 "refused with the reason on stderr and exit status 2 before anything runs;\n"
                 "no output is written.\n\n"
                 "Files: `model.c` (kernels, thread pool, `model_run_syms`), `model_shapes.c`\n"
                 "(the binding checked, the shapes at it, `model_run_shape`), `model.h` (the\n"
                 "ABI; its last section is the ShapeSet part), `main.c`, `Makefile`,\n"
                 "`weights.bin`, `inputs/`, `expected/`.\n\n"
                 "Each instance's arena is the upper corner's bytes (`model_required_memory()`)\n"
                 "from its first run, every page touched then, so no later binding faults\n"
                 "one in; a binding lays out `model_required_memory_at(syms)` of them.\n");
}
