/* cli.h — shared pieces of the harp command-line driver.  The driver is the
 * only code that prints or exits. */
#ifndef HARP_CLI_H
#define HARP_CLI_H

#include <stdbool.h>

#include "harp/error.h"
#include "harp/tensor.h"
#include "harp/tiny.h"

#define CLI_MAX_LIST 256

/* Options most commands share. */
typedef struct cli_opts {
  const char *model;
  const char *out_dir;  /* --out */
  const char *dump_dir; /* --dump-dir (defaults to out_dir) */
  const char *backend;  /* --backend */
  const char *dumps[CLI_MAX_LIST];
  int ndumps;
  const char *outputs[CLI_MAX_LIST]; /* --outputs: node ids to return instead */
  int noutputs;
  const char *input_names[CLI_MAX_LIST], *input_files[CLI_MAX_LIST];
  int ninputs;
  const char *params[CLI_MAX_LIST]; /* --param NAME=FILE: inputs that are weights */
  int nparams;
  const char *target; /* --target: cpu|sm80|sm90 (compile; the machine regions are formed for) */
  const char *precision; /* --precision: tf32|fp32|fp16|bf16, how fp32 contractions compute on the GPU */
  const char *plans[CLI_MAX_LIST]; /* --plan REGION=FILE | FILE (borrowed from argv) */
  int nplans;
  bool random_inputs;
  unsigned long long seed;
  tiny_symtab syms; /* --sym */
  struct onnx_shape *shapes; /* --shape NAME=1x3x224x224 (ONNX models) */
  int nshapes;
  bool need_shapes; /* set by cli_load_model: an ONNX model's dynamic dims must all be given */
  bool fix_needed;  /* harp run: an --input whose values a node needs at import is fixed (--param) */
  bool host_flow;        /* the command runs run-time control flow on the host (run, bench) */
  long long loop_limit;  /* --loop-limit: a Loop's iterations at most (0: the default) */
  unsigned long long max_memory; /* --max-memory: one instance's arena plus weights at most (0: the machine's) */
} cli_opts;

/* A loaded model: the prepared Tiny graph plus the tensors that feed it. */
typedef struct cli_model {
  tiny_graph *g;
  struct hg_program *program; /* .harp models: the frontend program (else NULL) */
  struct onnx_model *onnx; /* .onnx models: the import (weights, names); its program is `program` */
  tiny_symtab defaults;       /* .harp models: graph<B=1> defaults, bound last */
  tiny_symtab syms;    /* final binding */
  ut_tensor *inputs;   /* one per INPUT node, graph order (a host program: per model input, its order) */
  int ninputs;
  const struct flow_program *flow; /* .onnx models with run-time control flow: the host program (g is NULL) */
} cli_model;

/* Print "harp: error[...]" for e to stderr and return the exit code (1, or 2
 * for internal errors). */
int cli_report(const harp_error *e);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse the shared options.  Unknown options are an error.  `allowed` is a
 * string of the option names the command accepts, e.g. "input sym out dump". */
int cli_parse(int argc, char **argv, const char *cmd, const char *allowed, cli_opts *o, harp_error *e);
void cli_opts_free(cli_opts *o);
/* --shape NAME=1x3x224x224: one more given shape. */
harp_status cli_add_shape(cli_opts *o, const char *spec, harp_error *e);

/* Load MODEL by extension, bind symbols (--sym, then input files, then model
 * defaults), read or generate inputs, and prepare the graph.  With
 * need_inputs false (dump), unbound symbols are allowed and no tensor is read. */
harp_status cli_load_model(harp_error *e, cli_opts *o, bool need_inputs, cli_model *m);
void cli_model_free(cli_model *m);
/* The model file's graph alone, unbound and unprepared (m->g, m->program;
 * a .harp model's graph<B=1> defaults into *defaults). */
harp_status cli_load_graph(harp_error *e, cli_opts *o, cli_model *m, tiny_symtab *defaults);

/* Write the requested dumps that belong to the Tiny layer and earlier;
 * returns HARP_OK.  Fails on an unknown dump name. */
harp_status cli_write_dumps(harp_error *e, const cli_opts *o, const cli_model *m);
bool cli_wants_dump(const cli_opts *o, const char *name);
/* indexbook.json / poly_view.json when asked for (dump_poly.c). */
harp_status cli_write_poly_dumps(harp_error *e, const cli_opts *o, const cli_model *m);

/* region.json / function.json when asked for (dump_region.c). */
harp_status cli_write_region_dumps(harp_error *e, const cli_opts *o, const cli_model *m);
/* Form the regions of a loaded model for --target (dump_region.c). */
struct rg_partition;
harp_status cli_form_regions(harp_error *e, const cli_opts *o, const cli_model *m, struct rg_partition **out);
/* GPU dumps (dump_gpu.c): gpu.json and model.cu.  cli_gpu_target checks
 * --target (sm80 | sm90), dflt when absent (NULL: the device's). */
struct rt_gpu_model;
harp_status cli_gpu_target(harp_error *e, const cli_opts *o, const char *dflt, const char **target);
harp_status cli_write_gpu_model_dumps(harp_error *e, const cli_opts *o, const struct rt_gpu_model *gm);
struct cli_plans;
harp_status cli_write_gpu_dumps(harp_error *e, const cli_opts *o, const cli_model *m, const struct cli_plans *pl);
/* Write text to DIR/FILE atomically (DIR is created). */
harp_status cli_write_text(harp_error *e, const char *dir, const char *file, const char *text);

/* Wall-clock milliseconds; t[0..n) sorted (t[0] / t[n-1] are min / max) and its median (cmd_bench.c). */
double cli_now_ms(void);
double cli_sorted_median(double *t, long n);

/* Random inputs as --random-inputs makes them (state: the seeded RNG). */
harp_status cli_random_tensor(harp_error *e, tiny_dtype dt, int rank, const int64_t *shape, uint64_t *state, ut_tensor *t);

/* Models with run-time control flow (cli_flow.c): the inputs of the host
 * program (cli_load_model's part for them), and run / bench over it. */
harp_status cli_flow_inputs(harp_error *e, cli_opts *o, bool need_inputs, cli_model *m);
int cli_flow_run(cli_opts *o, cli_model *m, const char *backend, bool graphs);
int cli_flow_bench(cli_opts *o, cli_model *m, const char *backend, bool graphs, long warmup, long repeat, bool json);

/* Write tensors to DIR/<name>.npy, all or nothing. */
harp_status cli_write_outputs(harp_error *e, const char *dir, const char *const *names, const ut_tensor *t, int n);

/* .harp models (cmd_frontend.c): load, lower to Tiny IR; defaults receives
 * the graph<...> default bindings. */
harp_status cli_harp_load(harp_error *e, const cli_opts *o, tiny_graph **g, tiny_symtab *defaults,
                        struct hg_program **program);

/* .onnx models (cmd_frontend.c): import, lower; *onnx holds the weights
 * and the name map (its program is the model's). */
struct onnx_model;
struct onnx_shape;
/* The shapes known before an import: --shape, then the --input files'
 * (loose); *shapes malloc'd.  The reader of --param k's file (ctx: o). */
harp_status cli_given_shapes(harp_error *e, const cli_opts *o, struct onnx_shape **shapes, int *n);
harp_status cli_read_param(harp_error *e, void *ctx, int k, ut_tensor *out);
harp_status cli_onnx_load(harp_error *e, cli_opts *o, tiny_graph **g, tiny_symtab *defaults, struct onnx_model **onnx);

/* --plan and --dump plan (cli_plan.c). */
struct rt_plan_override;
struct rt_plans;
typedef struct cli_plans {
  struct rt_plan_override *ov; /* the overrides of every --plan, in order */
  int n;
  char **keep; /* the texts they came from */
  int nkeep;
} cli_plans;
/* Read every --plan (for the machine of --target, default cpu). */
harp_status cli_plans_load(harp_error *e, const cli_opts *o, cli_plans *out);
void cli_plans_free(cli_plans *p);
/* DIR/plan.json: the plans of a compiled model (compiled != NULL), else the
 * plans the cpu backend (or --target's machine) would choose: regions formed,
 * overrides, plan cache, defaults.  Only when --dump plan was asked for. */
harp_status cli_write_plan_dump(harp_error *e, const cli_opts *o, const cli_model *m, const cli_plans *pl,
                              const struct rt_plans *compiled);
/* One line per region saying where its plan came from, to stderr, for
 * notes worth seeing (ignored cache entries, refused plans). */
void cli_print_plan_notes(const struct rt_plans *ps);

/* Commands. */
int cmd_run(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_decompile(int argc, char **argv);
/* s as a JSON string literal, quotes included (malloc'd; NULL: out of memory). */
char *cli_json_quote(const char *s);

int cmd_viz(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_ops(int argc, char **argv);

#endif
