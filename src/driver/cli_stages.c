/* cli_stages.c — the compiles a command runs (harp/pipeline.h) and the
 * dumps read from their stages: indexbook, poly_view, region, function,
 * plan (any target), gpu and cu (CUDA), c (the CPU).  A dump is read from
 * the command's own compile when that compile makes it, else from a compile
 * for the dump's target (--target: cpu, sm80, sm90; gpu and cu: CUDA, sm80
 * by default) that stops after the last stage those dumps need.  So
 * `--dump region` is the partition the backend compiles: the compile that
 * forms it is the backend's.
 * A GPU dump with --shapeset is the box's build at the binding: the regions
 * and plans its corner hi decides (box_upper), as a session's box build.
 * Needs: harp/pipeline.h, each layer's JSON writer.  Gives: cli_dumps_*,
 * cli_compile, cli_print_stage_times, cli_target_of. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/region_cuda.h"
#include "cli.h"
#include "harp/poly.h"
#include "harp/region.h"
#include "harp/sgen.h"
#include "index/indexbook.h"
#include "util/util.h"

#define MAX_DUMPS ((int)(sizeof((cli_dumps *)0)->name / sizeof(char *)))

void cli_dumps_init(cli_dumps *d, const cli_opts *o) {
  memset(d, 0, sizeof *d);
  d->o = o;
  for (int i = 0; i < o->ndumps && d->n < MAX_DUMPS; i++) {
    int s = rt_stage_of_dump(o->dumps[i]);
    bool seen = false;
    for (int k = 0; k < d->n; k++) seen |= !strcmp(d->name[k], o->dumps[i]);
    if (s < RT_STAGE_INDEXBOOK || seen) continue; /* frontend, tiny: cli_write_dumps */
    d->name[d->n] = o->dumps[i];
    d->stage[d->n++] = s;
  }
}

void cli_dumps_free(cli_dumps *d) {
  for (int i = 0; i < d->n; i++) free(d->text[i]);
  memset(d, 0, sizeof *d);
}

harp_status cli_target_of(harp_error *e, const cli_opts *o, const rt_target **t, const char **arch) {
  *arch = NULL;
  if (!(*t = o->target ? rt_target_of_machine(o->target, arch) : &rt_target_cpu))
    return ut_fail(e, HARP_E_USAGE, NULL, "--target expects cpu, sm80 or sm90, got '%s'", o->target);
  return HARP_OK;
}

/* The target and architecture dump i is made on: the target whose own
 * stage makes it (c, gpu, cu), else --target's or the command's. */
static harp_status dump_target(harp_error *e, const cli_dumps *d, int i, const rt_target **t, const char **arch) {
  const rt_target *own = rt_target_of_dump(d->name[i]);
  if (own == &rt_target_cuda) {
    *t = own;
    return cli_gpu_target(e, d->o, d->own == own && d->own_arch ? d->own_arch : "sm80", arch);
  }
  if (own) {
    *t = own, *arch = NULL;
    return HARP_OK;
  }
  if (!d->o->target && d->own) {
    *t = d->own, *arch = d->own_arch;
    return HARP_OK;
  }
  return cli_target_of(e, d->o, t, arch);
}

static bool same_arch(const char *a, const char *b) { return !a || !b || !strcmp(a, b); }

/* The dumps a compile for t (arch) makes, as a bit set. */
static unsigned served(const cli_dumps *d, const rt_target *t, const char *arch) {
  unsigned set = 0;
  for (int i = 0; i < d->n; i++) {
    const rt_target *dt;
    const char *da;
    harp_error e = {0}; /* a bad --target: said by cli_dumps_finish */
    if (!dump_target(&e, d, i, &dt, &da) && dt == t && (t != &rt_target_cuda || same_arch(da, arch))) set |= 1u << i;
  }
  return set;
}

bool cli_dumps_own(cli_dumps *d, const rt_target *t, const char *arch) {
  d->own = t, d->own_arch = arch;
  unsigned set = served(d, t, arch);
  for (int i = 0; i < d->n; i++)
    if (set >> i & 1 && d->stage[i] <= RT_STAGE_POLY_VIEW) return true;
  return false;
}

/* ---- the stage dumps: name, file, and the text from a compile ---------------------- */
static harp_status dump_indexbook(harp_error *e, const rt_compile *c, char **t) { return ib_dump_json(e, c->ib, t); }
static harp_status dump_poly_view(harp_error *e, const rt_compile *c, char **t) { return poly_dump_json(e, c->pv, t); }
static harp_status dump_region(harp_error *e, const rt_compile *c, char **t) { return rg_dump_json(e, c->part, t); }
static harp_status dump_plan(harp_error *e, const rt_compile *c, char **t) { return rt_plans_dump_json(e, &c->plans, t); }
static harp_status dump_gpu(harp_error *e, const rt_compile *c, char **t) { return cuda_model_dump_json(e, c->tu, t); }
static harp_status dump_function(harp_error *e, const rt_compile *c, char **t) {
  return (*t = fn_dump_json(c->f)) ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
}
static harp_status dump_source(harp_error *e, const rt_compile *c, char **t) {
  return c->source && (*t = strdup(c->source)) ? HARP_OK : ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
}

typedef harp_status (*dump_fn)(harp_error *e, const rt_compile *c, char **text);
static const struct {
  const char *name, *file;
  dump_fn render;
} dump_table[] = {{"indexbook", "indexbook.json", dump_indexbook}, {"poly_view", "poly_view.json", dump_poly_view},
                  {"region", "region.json", dump_region},          {"function", "function.json", dump_function},
                  {"plan", "plan.json", dump_plan},                {"gpu", "gpu.json", dump_gpu},
                  {"c", "model.c", dump_source},                   {"cu", "model.cu", dump_source}};

static int dump_row(const char *name) {
  for (int i = 0; i < (int)(sizeof dump_table / sizeof dump_table[0]); i++)
    if (!strcmp(dump_table[i].name, name)) return i;
  return -1;
}

/* Dump `name` of compile c as text (malloc'd). */
static harp_status render(harp_error *e, const rt_compile *c, const char *name, char **text) {
  *text = NULL;
  int i = dump_row(name);
  return i < 0 ? ut_fail(e, HARP_E_INTERNAL, NULL, "no dump '%s'", name) : dump_table[i].render(e, c, text);
}

/* After stage s of c: the served dumps of s, rendered again if s ran
 * again; the plan list again after code (and after the GPU's kernels), which
 * records the plans they applied. */
harp_status cli_dumps_hook(void *ctx, harp_error *e, const rt_compile *c, rt_stage s) {
  cli_dumps *d = ctx;
  const char *arch = c->target == &rt_target_cuda ? cuda_arch_name((cuda_arch)c->arch) : NULL;
  if (!d->describing && c->target == &rt_target_cuda) d->own_arch = arch; /* the device's, now known */
  unsigned set = served(d, c->target, arch);
  for (int i = 0; i < d->n; i++) {
    bool plans_again = d->stage[i] == RT_STAGE_PLANS && (s == RT_STAGE_CODE || (s == RT_STAGE_KERNELS && c->plans.compiled));
    if (!(set >> i & 1) || !(d->stage[i] == (int)s || plans_again))
      continue;
    free(d->text[i]);
    d->text[i] = NULL;
    if (render(e, c, d->name[i], &d->text[i])) return e->code;
  }
  return HARP_OK;
}

static const char *file_of(const char *name) {
  int i = dump_row(name);
  return i < 0 ? "dump.txt" : dump_table[i].file;
}

void cli_print_stage_times(const cli_opts *o, const cli_model *m, const rt_compile *c) {
  if (!o->time_stages || !c) return;
  char buf[1024];
  rt_compile_times(c, buf, sizeof buf);
  if (m && c->g == m->g && !c->opts.normalize)
    fprintf(stderr, "harp: stages (%s): load %.1f ms, normalize %.1f ms, %s\n", c->target->name, m->load_ms, m->normalize_ms, buf);
  else
    fprintf(stderr, "harp: stages (%s): %s\n", c->target->name, buf);
}

/* `harp dump --target sm80|sm90 --shapeset NAME=LO..HI`: the GPU kernels
 * that can read NAME's size at run time do (region_cuda.h cuda_syms), the
 * model bound inside the box (--sym NAME=V; at HI its buffers serve the box),
 * and the derived symbols that read them (cuda_syms_derived).  names[CLI_MAX_LIST]
 * and hi[CLI_MAX_LIST] into co. */
static harp_status gpu_box_syms(harp_error *e, const cli_opts *o, const cli_model *m, char (*names)[CLI_NAME_MAX],
                                const char **ptrs, int64_t *hi, rt_compile_opts *co) {
  int nb = 0; /* the box's own: one the model defines (tiny_ties_drop's: a tie, G := 2*H) follows them */
  for (int k = 0; k < o->nshapesets; k++) {
    rt_sgen_sym y;
    int64_t v = 0;
    if (rt_sgen_parse_box(e, o->shapesets[k], "--shapeset", names[nb], CLI_NAME_MAX, &y)) return e->code;
    if (!tiny_symtab_get(&m->syms, y.name, &v) || v < y.lo || v > y.hi)
      return ut_fail(e, HARP_E_USAGE, NULL, "--shapeset %s for a GPU dump: bind %s inside the box (--sym %s=%lld: its upper corner)",
                     o->shapesets[k], y.name, y.name, (long long)y.hi);
    if (tiny_dsym_find(m->g, y.name) < 0) ptrs[nb] = names[nb], hi[nb++] = y.hi;
  }
  int n = 0; /* with the derived sizes that vary with them (a strided pool's (H + 1) floordiv 2) */
  if (cuda_syms_derived(e, m->g, &m->syms, ptrs, hi, nb, CLI_MAX_LIST, &n)) return e->code;
  co->gen_syms = ptrs, co->gen_hi = hi, co->ngen_syms = n;
  return HARP_OK;
}

/* The box's corner hi of a GPU dump with --shapeset (co's symbols at their
 * hi, the rest as m binds them): m's model before binding (m->raw) into
 * *ghi, *shi, compiled for t up to its final regions and plans (*chi);
 * nothing (*chi NULL) when m is bound at that corner already. */
static harp_status box_upper(harp_error *e, const cli_model *m, const rt_target *t, const rt_compile_opts *co,
                             tiny_graph **ghi, tiny_symtab *shi, rt_compile **chi) {
  bool at_hi = true;
  for (int k = 0; k < co->ngen_syms; k++) {
    int64_t v = 0;
    at_hi = at_hi && tiny_symtab_get(&m->syms, co->gen_syms[k], &v) && v == co->gen_hi[k];
  }
  if (at_hi || !m->raw) return HARP_OK;
  if (tiny_ties_drop(e, m->g, &m->syms, shi)) return e->code; /* those the model defines: computed from the others */
  for (int i = 0; i < shi->n; i++) /* the box's own at hi */
    for (int k = 0; k < co->ngen_syms; k++)
      if (!strcmp(co->gen_syms[k], shi->names[i])) shi->values[i] = co->gen_hi[k];
  if (tiny_load_json(e, m->raw, strlen(m->raw), "<the box's corner hi>", ghi) || tiny_dsym_bind(e, *ghi, shi) ||
      tiny_prepare(e, *ghi, shi, false))
    return e->code;
  rt_compile_opts ho = *co;
  ho.until = t->regions_final, ho.after_stage = NULL, ho.hook_ctx = NULL, ho.keep_analysis = false;
  return rt_compile_run(e, t, *ghi, shi, &ho, chi);
}

harp_status cli_compile(harp_error *e, const cli_opts *o, cli_model *m, const cli_plans *pl, const rt_target *t,
                      const char *arch, rt_stage until, cli_dumps *d, rt_compile **out) {
  *out = NULL;
  if (until >= RT_STAGE_REGIONS && until < t->regions_final) until = t->regions_final; /* the partition compiled */
  rt_compile_opts co = {.knobs = &o->knobs, .until = until, .arch = arch, .precision = o->precision,
                        .plan_overrides = pl ? pl->ov : NULL, .nplan_overrides = pl ? pl->n : 0};
  if (d) {
    unsigned set = served(d, t, arch);
    for (int i = 0; i < d->n; i++) co.keep_analysis |= (set >> i & 1) && d->stage[i] <= RT_STAGE_POLY_VIEW;
    co.after_stage = cli_dumps_hook, co.hook_ctx = d;
  }
  char names[CLI_MAX_LIST][CLI_NAME_MAX];
  const char *ptrs[CLI_MAX_LIST];
  int64_t hi[CLI_MAX_LIST];
  tiny_graph *ghi = NULL;
  tiny_symtab shi;
  tiny_symtab_init(&shi);
  rt_compile *chi = NULL; /* a GPU box: its corner hi decides the regions and plans, this binding replays them */
  harp_status st = HARP_OK;
  if (t == &rt_target_cuda && o->nshapesets && gpu_box_syms(e, o, m, names, ptrs, hi, &co)) st = e->code;
  if (!st && co.ngen_syms && (until == RT_STAGE_LOAD || until >= RT_STAGE_REGIONS)) st = box_upper(e, m, t, &co, &ghi, &shi, &chi);
  if (chi) co.replay_regions = chi->part, co.replay_plans = &chi->plans;
  if (!st) st = rt_compile_run(e, t, m->g, &m->syms, &co, out);
  if (!st) (*out)->opts.replay_regions = NULL, (*out)->opts.replay_plans = NULL; /* chi's, freed below */
  if (!st) cli_print_stage_times(o, m, *out);
  rt_compile_free(chi);
  tiny_graph_free(ghi);
  tiny_symtab_free(&shi);
  return st;
}

/* The dumps no compile made yet, from a compile for their target up to the
 * last stage they need (one compile per target). */
static harp_status describe(harp_error *e, cli_dumps *d, cli_model *m, const cli_plans *pl) {
  bool done[8] = {false};
  d->describing = true;
  for (int i = 0; i < d->n; i++) {
    if (d->text[i] || done[i]) continue;
    const rt_target *t;
    const char *arch;
    if (dump_target(e, d, i, &t, &arch)) return e->code;
    unsigned set = served(d, t, arch);
    rt_stage until = RT_STAGE_INDEXBOOK;
    for (int k = 0; k < d->n; k++)
      if (set >> k & 1 && !d->text[k] && d->stage[k] > (int)until) until = (rt_stage)d->stage[k];
    for (int k = 0; k < d->n; k++) done[k] |= set >> k & 1;
    rt_compile *c = NULL;
    harp_status st = cli_compile(e, d->o, m, pl, t, arch, until, d, &c);
    rt_compile_free(c);
    if (st) return st;
  }
  return HARP_OK;
}

harp_status cli_dumps_finish(harp_error *e, cli_dumps *d, cli_model *m, const cli_plans *pl) {
  if (describe(e, d, m, pl)) return e->code;
  for (int i = 0; i < d->n; i++)
    if (!d->text[i]) return ut_fail(e, HARP_E_INTERNAL, NULL, "dump '%s' was not made", d->name[i]);
  for (int i = 0; i < d->n; i++)
    if (cli_write_text(e, d->o->dump_dir, file_of(d->name[i]), d->text[i])) return e->code;
  return HARP_OK;
}

void cli_dumps_salvage(cli_dumps *d) {
  for (int i = 0; i < d->n; i++) {
    harp_error e = {0};
    if (d->text[i]) cli_write_text(&e, d->o->dump_dir, file_of(d->name[i]), d->text[i]);
  }
}
