/* gpu_session.c — one model, many shape bindings, one CUDA Graph per
 * ShapeSet (seed 000 §8: "CUDA Graph: capture one per shape cluster and
 * reuse it").
 * Needs: gpu.c (models for one binding), gpu_box.c (one for a box), plan (ShapeSet keys), cuda_rt
 * (graph capture / instantiate / update).  Gives: rt_gpu_session_*.
 *
 * A cluster's box (gpu_box.c) is decided on its first binding: when its
 * kernels read the box's sizes at run time, one build (one NVRTC compile,
 * one arena at the box's corner hi) serves every binding of the cluster,
 * each binding's model a view of it with its own sizes (rt_gpu_model.sv,
 * .gio) and captured graph.  Otherwise (a kernel prints a size: a template,
 * a simple row kernel; gpu_box.why) each binding gets its own built model
 * (NVRTC's disk cache makes a rebuild cheap) and its own captured graph.
 * Either way what is shared per ShapeSet is the executable graph: the
 * first binding of a cluster instantiates it; a later binding of the same
 * cluster updates it in place (cuGraphExecUpdate: new kernels, grids and
 * arguments, same topology), which costs far less than instantiating; the
 * same binding again replays it untouched.  When the driver refuses an
 * update (another launch count, an old driver) the exec is instantiated
 * anew.  Built models are kept for the RT_GPU_SESSION_MODELS most recently
 * used bindings; dropping the model an exec points into drops that exec
 * too, so a graph never outlives the arena its arguments address.
 * Symbols held fixed (rt_gpu_opts.fixed) are not a box's and their values
 * are part of a cluster's key (cluster_key); without them a cluster whose
 * box builds per binding decides it again once its bindings show which
 * symbols move, the others held (learn_box). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "gpu_int.h"
#include "harp/plan.h"
#include "util/util.h"

typedef struct sess_model {
  char binding[PLAN_SHAPESET_MAX]; /* "B=3;T=128" */
  int cluster;                     /* index into clusters */
  uint64_t id;                     /* unique over the session (0: free slot) */
  uint64_t used;                   /* LRU tick */
  tiny_graph *g;                   /* prepared for this binding */
  tiny_symtab syms;
  rt_gpu_model *m;         /* its own, or its cluster's box build (borrowed) */
  bool borrowed;
  int64_t *sv;             /* borrowed: the box's symbols at this binding */
  cuda_rt_graph *captured; /* its launches, captured on its first graph run */
} sess_model;

typedef struct sess_cluster {
  char key[PLAN_SHAPESET_MAX]; /* plan_shapeset_key: "B:4;T:128" */
  cuda_rt_graph *exec;         /* the cluster's executable graph (NULL: none yet) */
  uint64_t current;            /* id of the model whose launches exec holds */
  gpu_box *box;                /* decided on the cluster's first binding (box->m NULL: per binding) */
  char *json;                  /* the model with the box's ties (gpu_box_ties: G := 2*H); NULL: the session's */
  tiny_symtab first;           /* the cluster's first binding */
  uint64_t moved;              /* first's symbols (bit i: names[i]) another binding of the cluster changed */
  uint64_t decided;            /* moved when box was decided again (learn_box); 0: never */
} sess_cluster;

struct rt_gpu_session {
  char *json;      /* the unbound graph, re-read for each new binding */
  tiny_graph *key_g; /* the unbound graph itself: which symbols a key names */
  rt_gpu_opts opts;
  char **fixed;      /* opts.fixed, copied (opts.fixed points here) */
  cuda_rt *rt; /* shared by every model of the session */
  sess_model models[RT_GPU_SESSION_MODELS];
  sess_cluster *clusters;
  int nclusters, capclusters;
  uint64_t tick, next_id;
  rt_gpu_session_stats st;
};

static void drop_model(rt_gpu_session *s, sess_model *sm) {
  if (!sm->id) return;
  sess_cluster *c = &s->clusters[sm->cluster];
  if (c->current == sm->id) { /* the exec addresses this model's arena and kernels */
    cuda_rt_graph_free(s->rt, c->exec);
    c->exec = NULL;
    c->current = 0;
  }
  cuda_rt_graph_free(s->rt, sm->captured);
  if (!sm->borrowed) rt_gpu_free(sm->m);
  free(sm->sv);
  tiny_graph_free(sm->g);
  tiny_symtab_free(&sm->syms);
  memset(sm, 0, sizeof *sm);
}

void rt_gpu_session_free(rt_gpu_session *s) {
  if (!s) return;
  for (int i = 0; i < RT_GPU_SESSION_MODELS; i++) drop_model(s, &s->models[i]);
  for (int i = 0; i < s->nclusters; i++) {
    cuda_rt_graph_free(s->rt, s->clusters[i].exec);
    gpu_box_free(s->clusters[i].box);
    free(s->clusters[i].json);
    tiny_symtab_free(&s->clusters[i].first);
  }
  for (int i = 0; s->fixed && i < s->opts.nfixed; i++) free(s->fixed[i]);
  free(s->fixed);
  free(s->clusters);
  tiny_graph_free(s->key_g);
  free(s->json);
  cuda_rt_close(s->rt);
  free(s);
}

harp_status rt_gpu_session_new(harp_error *e, const tiny_graph *g, const rt_gpu_opts *o, rt_gpu_session **out) {
  *out = NULL;
  rt_gpu_session *s = ut_xcalloc(1, sizeof *s);
  if (!s) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  if (o) s->opts = *o;
  harp_status st = HARP_OK;
  s->opts.fixed = NULL, s->opts.nfixed = 0;
  if (o && o->nfixed > 0 && !(s->fixed = ut_xcalloc((size_t)o->nfixed, sizeof *s->fixed))) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  for (int i = 0; o && i < o->nfixed; i++, s->opts.nfixed++) /* the caller's names are not borrowed */
    if (!o->fixed[i] || !(s->fixed[i] = strdup(o->fixed[i]))) {
      st = o->fixed[i] ? ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory")
                       : ut_fail(e, HARP_E_USAGE, NULL, "a session's fixed symbol %d is NULL", i);
      goto fail;
    }
  s->opts.fixed = (const char *const *)s->fixed;
  if (!(s->json = tiny_write_json(g))) {
    st = ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
    goto fail;
  }
  if ((st = tiny_load_json(e, s->json, strlen(s->json), "<session>", &s->key_g))) goto fail;
  rt_knobs k;
  gpu_knobs(o, &k);
  rt_cc_opts cc = {.cache_dir = k.cache_dir};
  char *cache = rt_cc_cache_dir(&cc);
  st = gpu_rt_open(e, &k, cache, false, 0, &s->rt);
  free(cache);
  cuda_arch arch;
  if (st || (st = gpu_target(e, o ? o->target : NULL, s->rt, &arch))) goto fail;
  s->opts.target = cuda_arch_name(arch); /* every binding builds for the same branch */
  s->opts.graphs = o && o->graphs;
  *out = s;
  return HARP_OK;
fail:
  rt_gpu_session_free(s);
  return st;
}

/* The cluster of key; -1: none yet. */
static int cluster_of(const rt_gpu_session *s, const char *key) {
  for (int i = 0; i < s->nclusters; i++)
    if (!strcmp(s->clusters[i].key, key)) return i;
  return -1;
}

static int find_cluster(harp_error *e, rt_gpu_session *s, const char *key) {
  int had = cluster_of(s, key);
  if (had >= 0) return had;
  if (s->nclusters == s->capclusters) {
    int cap = s->capclusters ? 2 * s->capclusters : 8;
    sess_cluster *c = realloc(s->clusters, (size_t)cap * sizeof *c);
    if (!c) {
      ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
      return -1;
    }
    s->clusters = c, s->capclusters = cap;
  }
  sess_cluster *c = &s->clusters[s->nclusters];
  memset(c, 0, sizeof *c);
  snprintf(c->key, sizeof c->key, "%s", key);
  s->st.clusters++;
  return s->nclusters++;
}

/* Cluster c's record of binding: its first binding kept (copied), the
 * symbols a later one changes marked in c->moved (the first 64). */
static harp_status note_binding(harp_error *e, sess_cluster *c, const tiny_symtab *binding) {
  if (!c->first.n) {
    for (int i = 0; i < binding->n; i++)
      if (tiny_symtab_set(e, &c->first, binding->names[i], binding->values[i])) return e->code;
    return HARP_OK;
  }
  for (int i = 0; i < c->first.n && i < 64; i++) {
    int64_t v = 0;
    if (!tiny_symtab_get(binding, c->first.names[i], &v) || v != c->first.values[i]) c->moved |= 1ull << i;
  }
  return HARP_OK;
}

/* Cluster c's box decided again at binding when it builds per binding and
 * the cluster's bindings have moved other symbols since it was decided:
 * the symbols that stayed at the first binding's values (and the options'
 * fixed ones) held fixed, the moved ones the box's.  The old box serves no
 * model (it built none), so it is replaced either way. */
static harp_status learn_box(harp_error *e, rt_gpu_session *s, sess_cluster *c, const tiny_symtab *binding) {
  if (c->box->m || s->opts.per_binding || !c->moved || c->moved == c->decided) return HARP_OK;
  c->decided = c->moved;
  const char **names = ut_xcalloc((size_t)c->first.n + (size_t)s->opts.nfixed + 1, sizeof *names);
  if (!names) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  int k = 0, held = 0;
  for (int i = 0; i < s->opts.nfixed; i++) names[k++] = s->opts.fixed[i];
  for (int i = 0; i < c->first.n; i++)
    if (i >= 64 || !(c->moved >> i & 1)) names[k++] = c->first.names[i], held++;
  gpu_box *b = NULL;
  rt_gpu_opts mo = s->opts;
  mo.graphs = false, mo.fixed = names, mo.nfixed = k;
  harp_status st = held ? gpu_box_decide(e, c->json ? c->json : s->json, binding, &mo, s->rt, &b) : HARP_OK; /* none held: the same box */
  free(names);
  if (st || !b) return st;
  s->st.box_learned++;
  if (b->m) s->st.box_builds++, s->st.builds++;
  gpu_box_free(c->box);
  c->box = b;
  return HARP_OK;
}

/* The model of binding (its graph g prepared, symbols syms) in cluster c:
 * a view of the cluster's box build when it fits, else its own build. */
static harp_status model_in(harp_error *e, rt_gpu_session *s, int c, const tiny_symtab *binding, sess_model *sm) {
  sess_cluster *cl = &s->clusters[c];
  if (note_binding(e, cl, binding)) return e->code;
  if (cl->box && learn_box(e, s, cl, binding)) return e->code;
  if (!cl->box) {
    rt_gpu_opts mo = s->opts;
    mo.graphs = false; /* the session captures, not the model */
    if (gpu_box_decide(e, cl->json ? cl->json : s->json, binding, &mo, s->rt, &cl->box)) return e->code;
    if (s->opts.per_binding) snprintf(cl->box->why, sizeof cl->box->why, "per-binding builds were asked for");
    if (cl->box->m) s->st.box_builds++, s->st.builds++;
    else s->st.box_fallbacks++;
  }
  gpu_box *b = cl->box;
  if (b->m && (sm->sv = ut_xcalloc((size_t)b->gen.n + 1, sizeof *sm->sv)) && gpu_box_fits(b, sm->g, &sm->syms, sm->sv)) {
    sm->m = b->m, sm->borrowed = true;
    return HARP_OK;
  }
  if (b->m && !sm->sv) return ut_fail(e, HARP_E_NO_MEMORY, NULL, "out of memory");
  rt_gpu_opts mo = s->opts;
  mo.graphs = false;
  if (gpu_build_on(e, sm->g, &sm->syms, &mo, s->rt, &sm->m)) return e->code;
  s->st.builds++;
  return HARP_OK;
}

/* The ShapeSet key of binding (its text: "H=16;W=16") into key[cap]:
 * plan_shapeset_key, then each symbol the session holds fixed at its value
 * ("|C=3"); a fixed symbol the binding does not give is a usage error.
 * tied (NULL: none): the model with the ties of binding's class box
 * (gpu_box_ties, said their text): the symbols it defines left out of the
 * key and said added ("H:8|G = 3*H"), so G = 3 H over H 5..8 (G 15..24,
 * two classes of G) is one cluster. */
static harp_status cluster_key(harp_error *e, const rt_gpu_session *s, const tiny_symtab *binding, const char *tied,
                               const char *said, const char *text, char *key, size_t cap) {
  tiny_graph *g = NULL;
  tiny_symtab own; /* a tied symbol (G := 2*H + 1) follows the others: not in the key, its ties are */
  if (tied && tiny_load_json(e, tied, strlen(tied), "<session>", &g)) return e->code;
  if (g && tiny_ties_drop(e, g, binding, &own)) {
    tiny_graph_free(g);
    return e->code;
  }
  plan_shapeset_key(g ? &own : binding, s->key_g, key, cap);
  if (g) {
    size_t len = strlen(key);
    snprintf(key + len, cap - len, "|%s", said);
    tiny_symtab_free(&own);
    tiny_graph_free(g);
  }
  for (int i = 0; i < s->opts.nfixed; i++) {
    int64_t v = 0;
    if (!tiny_symtab_get(binding, s->opts.fixed[i], &v))
      return ut_fail(e, HARP_E_USAGE, NULL, "the session holds %s fixed, but the binding %s does not give it", s->opts.fixed[i],
                     text);
    size_t len = strlen(key);
    snprintf(key + len, cap - len, "|%s=%lld", s->opts.fixed[i], (long long)v);
  }
  return HARP_OK;
}

/* The model of this binding: found, or built (evicting the least recently
 * used when every slot is taken).  build false: only find. */
static harp_status get_model(harp_error *e, rt_gpu_session *s, const tiny_symtab *binding, bool build, sess_model **out) {
  *out = NULL;
  char text[PLAN_SHAPESET_MAX], key[PLAN_SHAPESET_MAX];
  plan_binding_text(binding, s->key_g, text, sizeof text);
  sess_model *lru = NULL; /* a free slot, else the least recently used */
  for (int i = 0; i < RT_GPU_SESSION_MODELS; i++) {
    sess_model *sm = &s->models[i];
    if (sm->id && !strcmp(sm->binding, text)) {
      sm->used = ++s->tick;
      *out = sm;
      return HARP_OK;
    }
    if (!lru || (lru->id && (!sm->id || sm->used < lru->used))) lru = sm;
  }
  if (!build) return ut_fail(e, HARP_E_USAGE, NULL, "the binding %s has not run in this session", text);
  if (lru->id) {
    drop_model(s, lru);
    s->st.evictions++;
  }
  sess_model *sm = lru;
  int c = -1;
  char *tied = NULL, said[256]; /* the model with its class box's ties made derived symbols (one breaking them refused) */
  harp_status st = gpu_box_ties(e, s->json, binding, &tied, said, sizeof said);
  if (!st) st = cluster_key(e, s, binding, tied, said, text, key, sizeof key);
  if (!st) c = cluster_of(s, key);
  const char *json = c >= 0 && s->clusters[c].json ? s->clusters[c].json : tied ? tied : s->json;
  if (!st) st = gpu_prepare_at(e, json, (const char *const *)binding->names, binding->values, binding->n, &sm->g, &sm->syms);
  if (!st && (c = find_cluster(e, s, key)) < 0) st = e->code; /* a binding that prepares opens a cluster */
  if (!st && tied && !s->clusters[c].json) s->clusters[c].json = tied, tied = NULL;
  free(tied);
  if (!st) st = model_in(e, s, c, binding, sm);
  if (st) {
    if (!sm->borrowed) rt_gpu_free(sm->m);
    free(sm->sv);
    tiny_graph_free(sm->g);
    tiny_symtab_free(&sm->syms);
    memset(sm, 0, sizeof *sm);
    return st;
  }
  snprintf(sm->binding, sizeof sm->binding, "%s", text);
  sm->cluster = c;
  sm->id = ++s->next_id;
  sm->used = ++s->tick;
  *out = sm;
  return HARP_OK;
}

/* The model of sm set to sm's binding (a box build's sizes and I/O shapes). */
static rt_gpu_model *at_binding(sess_model *sm) {
  if (sm->borrowed) sm->m->sv = sm->sv, sm->m->gio = sm->g;
  return sm->m;
}

/* The launches of one binding: direct, or through its cluster's graph
 * (captured, then instantiated or updated as the cluster needs). */
static harp_status session_launch(harp_error *e, rt_gpu_model *m, void *ctx) {
  rt_gpu_session *s = ((void **)ctx)[0];
  sess_model *sm = ((void **)ctx)[1];
  if (!s->opts.graphs) return gpu_launch_all(e, m);
  if (!sm->captured) {
    if (gpu_capture(e, m, false, &sm->captured)) return e->code;
    s->st.captures++;
  }
  sess_cluster *c = &s->clusters[sm->cluster];
  if (c->current != sm->id) {
    bool updated = false;
    if (c->exec && cuda_rt_graph_update(e, s->rt, c->exec, sm->captured, &updated)) return e->code;
    if (updated) {
      s->st.updates++;
    } else {
      cuda_rt_graph_free(s->rt, c->exec);
      c->exec = NULL;
      c->current = 0;
      if (cuda_rt_graph_instantiate(e, s->rt, sm->captured, &c->exec)) return e->code;
      s->st.instantiations++;
    }
    c->current = sm->id;
  }
  s->st.replays++;
  return cuda_rt_graph_launch(e, s->rt, c->exec);
}

harp_status rt_gpu_session_run(harp_error *e, rt_gpu_session *s, const tiny_symtab *binding, const ut_tensor *inputs,
                             int ninputs, ut_tensor *outputs) {
  sess_model *sm;
  if (get_model(e, s, binding, true, &sm)) return e->code;
  void *ctx[2] = {s, sm};
  return gpu_run_with(e, at_binding(sm), inputs, ninputs, outputs, NULL, session_launch, ctx);
}

harp_status rt_gpu_session_launch(harp_error *e, rt_gpu_session *s, const tiny_symtab *binding, bool sync) {
  sess_model *sm;
  if (get_model(e, s, binding, false, &sm)) return e->code;
  if (!sm->m->loaded) return ut_fail(e, HARP_E_USAGE, NULL, "the binding %s has not run in this session", sm->binding);
  void *ctx[2] = {s, sm};
  if (session_launch(e, at_binding(sm), ctx)) return e->code;
  return sync ? cuda_rt_sync(e, s->rt) : HARP_OK;
}

const rt_gpu_model *rt_gpu_session_model(rt_gpu_session *s, const tiny_symtab *binding) {
  harp_error e = {0};
  sess_model *sm;
  return get_model(&e, s, binding, false, &sm) ? NULL : sm->m;
}

void rt_gpu_session_stats_get(const rt_gpu_session *s, rt_gpu_session_stats *out) { *out = s->st; }

bool rt_gpu_session_box(rt_gpu_session *s, const tiny_symtab *binding, const char **why) {
  harp_error e = {0};
  sess_model *sm;
  const gpu_box *b = get_model(&e, s, binding, false, &sm) ? NULL : s->clusters[sm->cluster].box;
  if (why) *why = !b ? "the binding has not run in this session" : b->m ? "" : b->why;
  return b && b->m && sm->borrowed;
}
