/* standalone.c — the files of a standalone CPU package besides model.c:
 * model.h (the ABI), an example main.c that runs the model on .npy files,
 * and a Makefile.  None of them needs harp.
 * Needs: nothing.  Gives: cgen_standalone_header/main/makefile, the .npy
 * helpers of main.c (cgen_standalone_npy_common/_write). */
#include "standalone.h"

void cgen_standalone_header(ut_str *o) {
  ut_str_puts(o,
              "/* model.h — a model compiled by harp (see docs/c-api.md).\n"
              " *\n"
              " *   model_t *m = model_init(weights, model_params_bytes());   one arena per instance\n"
              " *   model_run(m, inputs, outputs);   0 on success\n"
              " *   model_free(m);\n"
              " *\n"
              " * inputs[k] points to input k (model_input_names[k]), outputs[k] to output k,\n"
              " * each dense row-major in its dtype: fp32 float, fp16/bf16 16-bit patterns,\n"
              " * i32 int32_t, bool one byte.  Inputs and outputs must not overlap. */\n"
              "#ifndef HARP_MODEL_H\n#define HARP_MODEL_H\n\n#include <stddef.h>\n\n"
              "typedef struct model_t model_t;\n\n"
              "model_t *model_init(const void *params, size_t nbytes);\n"
              "/* the same on nthreads threads, the caller's included (<= 0: as model_init) */\n"
              "model_t *model_init_threads(const void *params, size_t nbytes, int nthreads);\n"
              "int model_run(model_t *m, const void *const *inputs, void *const *outputs);\n"
              "void model_free(model_t *m);\n\n"
              "size_t model_required_memory(void); /* arena bytes per instance */\n"
              "size_t model_params_bytes(void);    /* size of weights.bin */\n"
              "int model_num_inputs(void);\nint model_num_outputs(void);\n\n"
              "/* names, dtypes (\"fp32\", \"fp16\", \"bf16\", \"i32\", \"bool\") and shapes\n"
              " * ({rank, d0, d1, ...}) of the inputs and outputs; NULL-terminated */\n"
              "extern const char *const model_input_names[];\nextern const char *const model_input_dtypes[];\n"
              "extern const long model_input_shapes[][13];\n"
              "extern const char *const model_output_names[];\nextern const char *const model_output_dtypes[];\n"
              "extern const long model_output_shapes[][13];\n\n#endif\n");
}

void cgen_standalone_makefile(ut_str *o, const char *extra) {
  ut_str_printf(o,
              "# Builds and runs the model without harp: make (or make run).\n"
              "CC ?= cc\nCFLAGS ?= -O3 -fopenmp-simd -fno-math-errno\n"
              "# Skylake-derived cores slow down on jumps across 32-byte boundaries (the\n"
              "# JCC erratum); where the assembler can avoid them, it does (padding only).\n"
              "JCC := $(shell $(CC) -Wa,-mbranches-within-32B-boundaries -x c -c /dev/null -o /dev/null 2>/dev/null"
              " && echo -Wa,-mbranches-within-32B-boundaries)\n\n"
              "all: run\n\n"
              "model_main: model.c%s%s main.c model.h\n"
              "\t$(CC) $(CFLAGS) $(JCC) -o $@ model.c%s%s main.c -lm -lpthread\n\n"
              "run: model_main\n\t./model_main\n\n"
              "clean:\n\trm -f model_main\n\n.PHONY: all run clean\n",
              extra ? " " : "", extra ? extra : "", extra ? " " : "", extra ? extra : "");
}

/* dtype_size, descr and count of main.c (shared with the ShapeSet one) */
void cgen_standalone_npy_common(ut_str *o) {
  ut_str_puts(o,
              "static size_t dtype_size(const char *dt) {\n"
              "  return !strcmp(dt, \"fp32\") || !strcmp(dt, \"i32\") ? 4 : !strcmp(dt, \"bool\") ? 1 : 2;\n}\n"
              "static const char *descr(const char *dt) {\n"
              "  return !strcmp(dt, \"fp32\") ? \"<f4\" : !strcmp(dt, \"fp16\") ? \"<f2\" : !strcmp(dt, \"i32\") ? \"<i4\"\n"
              "         : !strcmp(dt, \"bool\") ? \"|b1\" : \"<f4\"; /* bf16 travels as float32 */\n}\n"
              "static size_t count(const long *shape) {\n"
              "  size_t n = 1;\n  for (long d = 0; d < shape[0]; d++) n *= (size_t)shape[1 + d];\n  return n;\n}\n\n");
}

/* read_npy's first part (of main.c and the ShapeSet one): path opened as
 * f, its header h checked for dtype dt in C order */
void cgen_standalone_npy_open(ut_str *o) {
  ut_str_puts(o,
              "  FILE *f = fopen(path, \"rb\");\n"
              "  if (!f) { fprintf(stderr, \"cannot open %s\\n\", path); return NULL; }\n"
              "  unsigned char head[10];\n"
              "  if (fread(head, 1, 10, f) != 10 || memcmp(head, \"\\x93NUMPY\", 6) || head[6] != 1) {\n"
              "    fprintf(stderr, \"%s: not a version-1 .npy file\\n\", path); fclose(f); return NULL; }\n"
              "  size_t hl = head[8] | (size_t)head[9] << 8;\n"
              "  char *h = calloc(hl + 1, 1);\n"
              "  if (!h || fread(h, 1, hl, f) != hl || !strstr(h, descr(dt)) || strstr(h, \"True\")) {\n"
              "    fprintf(stderr, \"%s: expected dtype %s in C order\\n\", path, descr(dt)); free(h); fclose(f); return NULL; }\n");
}

/* read_npy's last part: count(shape) elements of f into a new buffer */
void cgen_standalone_npy_data(ut_str *o) {
  ut_str_puts(o,
              "  size_t n = count(shape), es = !strcmp(dt, \"bf16\") ? 4 : dtype_size(dt);\n"
              "  unsigned char *buf = malloc(n * es + 1);\n"
              "  if (!buf || fread(buf, es, n, f) != n) { fprintf(stderr, \"%s: short data\\n\", path); free(buf); fclose(f); return NULL; }\n"
              "  fclose(f);\n"
              "  if (!strcmp(dt, \"bf16\")) { /* round to nearest even */\n"
              "    unsigned short *out = (unsigned short *)buf;\n"
              "    for (size_t i = 0; i < n; i++) { unsigned int x; memcpy(&x, buf + 4 * i, 4);\n"
              "      x += 0x7fffu + ((x >> 16) & 1u); out[i] = (unsigned short)(x >> 16); }\n  }\n"
              "  return buf;\n}\n\n");
}

/* write_npy of main.c (shared with the ShapeSet one) */
void cgen_standalone_npy_write(ut_str *o) {
  ut_str_puts(o,
              "static int write_npy(const char *path, const char *dt, const long *shape, const void *data) {\n"
              "  char h[256];\n"
              "  int k = snprintf(h, sizeof h, \"{'descr': '%s', 'fortran_order': False, 'shape': (\", descr(dt));\n"
              "  for (long d = 0; d < shape[0]; d++)\n"
              "    k += snprintf(h + k, sizeof h - k, \"%ld%s\", shape[1 + d], shape[0] == 1 ? \",\" : d + 1 < shape[0] ? \", \" : \"\");\n"
              "  k += snprintf(h + k, sizeof h - k, \"), }\");\n"
              "  while ((10 + k + 1) % 64) h[k++] = ' ';\n  h[k++] = '\\n';\n"
              "  FILE *f = fopen(path, \"wb\");\n  if (!f) return -1;\n"
              "  unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(k & 0xff), (unsigned char)(k >> 8)};\n"
              "  fwrite(head, 1, 10, f);\n  fwrite(h, 1, (size_t)k, f);\n"
              "  size_t n = count(shape);\n"
              "  if (!strcmp(dt, \"bf16\")) {\n"
              "    for (size_t i = 0; i < n; i++) { unsigned int x = (unsigned int)((const unsigned short *)data)[i] << 16;\n"
              "      fwrite(&x, 4, 1, f); }\n"
              "  } else fwrite(data, dtype_size(dt), n, f);\n"
              "  return fclose(f);\n}\n\n");
}

void cgen_standalone_main(ut_str *o) {
  ut_str_puts(o,
              "/* main.c — runs the model on inputs/<name>.npy with weights.bin and writes\n"
              " * outputs/<name>.npy.  Usage: ./model_main [DIR]  (DIR defaults to .) */\n"
              "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <sys/stat.h>\n\n"
              "#include \"model.h\"\n\n");
  cgen_standalone_npy_common(o);
  ut_str_puts(o,
              "/* Read a C-order .npy of the expected dtype and shape (bf16: from float32). */\n"
              "static void *read_npy(const char *path, const char *dt, const long *shape) {\n");
  cgen_standalone_npy_open(o);
  ut_str_puts(o,
              "  char want[256] = \"(\";\n"
              "  for (long d = 0; d < shape[0]; d++) snprintf(want + strlen(want), sizeof want - strlen(want), \"%ld%s\",\n"
              "                                            shape[1 + d], shape[0] == 1 ? \",\" : d + 1 < shape[0] ? \", \" : \"\");\n"
              "  strcat(want, \")\");\n"
              "  if (!strstr(h, want)) { fprintf(stderr, \"%s: expected shape %s\\n\", path, want); free(h); fclose(f); return NULL; }\n"
              "  free(h);\n");
  cgen_standalone_npy_data(o);
  cgen_standalone_npy_write(o);
  ut_str_puts(o,
              "int main(int argc, char **argv) {\n"
              "  const char *dir = argc > 1 ? argv[1] : \".\";\n"
              "  char path[4096];\n"
              "  size_t pb = model_params_bytes();\n"
              "  void *weights = NULL;\n"
              "  if (pb) {\n"
              "    snprintf(path, sizeof path, \"%s/weights.bin\", dir);\n"
              "    FILE *f = fopen(path, \"rb\");\n"
              "    weights = malloc(pb);\n"
              "    if (!f || !weights || fread(weights, 1, pb, f) != pb) { fprintf(stderr, \"cannot read %s\\n\", path); return 1; }\n"
              "    fclose(f);\n  }\n"
              "  model_t *m = model_init(weights, pb);\n"
              "  if (!m) { fprintf(stderr, \"model_init failed\\n\"); return 1; }\n"
              "  int ni = model_num_inputs(), no = model_num_outputs();\n"
              "  void **in = calloc((size_t)ni + 1, sizeof *in), **out = calloc((size_t)no + 1, sizeof *out);\n"
              "  for (int k = 0; k < ni; k++) {\n"
              "    snprintf(path, sizeof path, \"%s/inputs/%s.npy\", dir, model_input_names[k]);\n"
              "    if (!(in[k] = read_npy(path, model_input_dtypes[k], model_input_shapes[k]))) return 1;\n  }\n"
              "  for (int k = 0; k < no; k++)\n"
              "    out[k] = calloc(count(model_output_shapes[k]) + 1, dtype_size(model_output_dtypes[k]));\n"
              "  int rc = model_run(m, (const void *const *)in, out);\n"
              "  if (rc) { fprintf(stderr, \"model_run failed: %d\\n\", rc); return 1; }\n"
              "  snprintf(path, sizeof path, \"%s/outputs\", dir);\n  mkdir(path, 0755);\n"
              "  for (int k = 0; k < no; k++) {\n"
              "    snprintf(path, sizeof path, \"%s/outputs/%s.npy\", dir, model_output_names[k]);\n"
              "    if (write_npy(path, model_output_dtypes[k], model_output_shapes[k], out[k])) {\n"
              "      fprintf(stderr, \"cannot write %s\\n\", path); return 1; }\n"
              "    printf(\"%s -> %s\\n\", model_output_names[k], path);\n  }\n"
              "  for (int k = 0; k < ni; k++) free(in[k]);\n  for (int k = 0; k < no; k++) free(out[k]);\n"
              "  free(in);\n  free(out);\n  free(weights);\n  model_free(m);\n  return 0;\n}\n");
}
