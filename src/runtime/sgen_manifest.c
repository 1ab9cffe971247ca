/* sgen_manifest.c — a ShapeSet box's decision kept in the compile cache:
 * the one object's cache entry and the Function a run needs, or why each
 * binding compiles, so that a new process with the same model and box
 * loads the object without compiling the box's corners (sgen.c).
 * Needs: the compile cache's directory (compile.c), the knob table, util
 * (hash, atomic writes).  Gives: sgen_manifest.h.
 *
 * File DIR/ssm-<16 hex>.txt, the hex a hash of everything the corners'
 * code depends on (rt_ssm_path).  Text, one record a line, ending in
 * "sum <16 hex>", the hash of every byte before it: a truncated or damaged
 * file, or one whose numbers do not fit the model, reads as a miss.
 *   harp-ssm 2
 *   glo NSYMS V...               the lower corner the object serves from
 *   quick Q                      1: the quick check of a new binding serves the box
 *   so NAME | fallback TEXT
 *   fn NBUF NKER NARGS NRET NNODES REQUIRED CONST
 *   b NODE KIND DTYPE NUMEL SIZE OFFSET SPACE FIRST LAST    (NBUF lines)
 *   k REGION NREADS R... NWRITES W... NAME                  (NKER lines)
 *   a ARG...  / r RET...  / o BUFFER_OF...                  (NNODES values)
 *   sum HASH */
#define _GNU_SOURCE 1 /* dladdr */
#include "sgen_manifest.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "compile.h"
#include "harp/knobs.h"
#include "harp/tune.h"
#include "util/util.h"

#define SSM_MAX_BYTES (64u << 20)

static uint64_t hash_str(const char *s, uint64_t h) { return ut_hash64(s ? s : "", strlen(s ? s : "") + 1, h); }

/* path's identity (device, inode, size, modification time) into h; a
 * missing path hashes as such. */
static uint64_t hash_stat(const char *path, uint64_t h) {
  struct stat st;
  int64_t v[6] = {0};
  if (path && !stat(path, &st))
    v[0] = (int64_t)st.st_dev, v[1] = (int64_t)st.st_ino, v[2] = (int64_t)st.st_size, v[3] = (int64_t)st.st_mtim.tv_sec,
    v[4] = (int64_t)st.st_mtim.tv_nsec, v[5] = 1;
  return ut_hash64(v, sizeof v, h);
}

/* harp's version and the file holding this code (the CLI or libharp.so):
 * another build of harp is another file. */
static uint64_t hash_build(uint64_t h) {
  Dl_info di;
  h = hash_str(HARP_VERSION_STRING, h);
  if (dladdr((void *)hash_build, &di) && di.dli_fname && di.dli_fname[0] == '/') return hash_str(di.dli_fname, hash_stat(di.dli_fname, h));
  return hash_stat("/proc/self/exe", h);
}

/* Every knob of k as text, and o's own settings, into h. */
static uint64_t hash_opts(const rt_cpu_opts *o, const rt_knobs *k, uint64_t h) {
  char buf[RT_KNOB_PATH + 64];
  for (int i = 0; i < rt_knob_count(); i++) {
    rt_knob_format(k, rt_knob_at(i), buf, sizeof buf);
    h = hash_str(rt_knob_at(i)->name, hash_str(buf, h));
  }
  h = hash_str(o->cc, hash_str(o->cflags, hash_str(o->precision, h)));
  uint64_t v[3] = {o->portable, o->no_plan_cache, o->max_memory};
  rt_cache_cpu_id(buf, sizeof buf);
  return hash_str(buf, ut_hash64(v, sizeof v, h));
}

bool rt_ssm_path(const char *text, const rt_sgen_sym *syms, int nsyms, const rt_cpu_opts *o, char *path, size_t cap) {
  static const rt_cpu_opts none;
  if (!o) o = &none;
  if (o->keep_source || o->keep_analysis || o->nplan_overrides || o->after_stage) return false;
  rt_knobs k = *rt_knobs_or_default(o->knobs);
  rt_knobs_set_build(&k, o->cc, o->cflags, o->cache_dir);
  char *dir = rt_cc_cache_dir(&(rt_cc_opts){.cache_dir = k.cache_dir});
  if (!dir) return false;
  uint64_t h = hash_build(hash_str("harp-ssm 1", 0x73736d31ull));
  h = hash_opts(o, &k, hash_str(text, h));
  for (int i = 0; i < nsyms; i++) {
    int64_t v[2] = {syms[i].lo, syms[i].hi};
    h = ut_hash64(v, sizeof v, hash_str(syms[i].name, h));
  }
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/plans", dir); /* a tuned plan or a new calibration changes the code */
  h = hash_stat(sub, h);
  snprintf(sub, sizeof sub, "%s/calib", dir);
  h = hash_stat(sub, h);
  int n = snprintf(path, cap, "%s/ssm-%016" PRIx64 ".txt", dir, h);
  free(dir);
  return n > 0 && (size_t)n < cap;
}

/* ---- reading ------------------------------------------------------------------------- */

/* A cursor over the manifest's text; ok falls at the first misfit. */
typedef struct ssm_rd {
  const char *p;
  bool ok;
} ssm_rd;

/* The next token, which must be tag. */
static void rd_tag(ssm_rd *r, const char *tag) {
  size_t n = strlen(tag);
  while (*r->p == ' ' || *r->p == '\n') r->p++;
  if (!r->ok || strncmp(r->p, tag, n) || (r->p[n] != ' ' && r->p[n] != '\n')) r->ok = false;
  else r->p += n;
}

/* The next integer, in lo..hi (else 0 and !ok). */
static int64_t rd_num(ssm_rd *r, int64_t lo, int64_t hi) {
  if (!r->ok) return 0;
  while (*r->p == ' ') r->p++;
  char *end;
  long long v = strtoll(r->p, &end, 10);
  if (end == r->p || v < lo || v > hi || (*end != ' ' && *end != '\n')) return r->ok = false, 0;
  r->p = end;
  return v;
}

/* The rest of the line (after one blank, not empty), *n its length (NULL: a misfit). */
static const char *rd_rest(ssm_rd *r, size_t *n) {
  if (!r->ok || *r->p != ' ') return r->ok = false, NULL;
  const char *s = ++r->p, *nl = strchr(s, '\n');
  if (!nl || nl == s) return r->ok = false, NULL;
  r->p = nl;
  *n = (size_t)(nl - s);
  return s;
}

/* n ints in lo..hi after tag into a new arena array. */
static int *rd_ints(ssm_rd *r, ut_arena *a, const char *tag, int n, int lo, int hi) {
  int *v = ut_arena_alloc(a, sizeof(int) * ((size_t)n + 1));
  if (!v) return r->ok = false, NULL;
  rd_tag(r, tag);
  for (int i = 0; i < n; i++) v[i] = (int)rd_num(r, lo, hi);
  return v;
}

/* One buffer line: its fields in range for a Function of nker kernels over nnodes nodes. */
static void rd_buffer(ssm_rd *r, fn_buffer *b, int id, int nnodes, int nker) {
  rd_tag(r, "b");
  b->id = id;
  b->node = (int)rd_num(r, 0, nnodes - 1);
  b->kind = (fn_buf_kind)rd_num(r, FN_INPUT, FN_TEMP);
  b->dtype = (tiny_dtype)rd_num(r, 0, TINY_DTYPE_COUNT - 1);
  b->numel = rd_num(r, 0, INT64_MAX);
  b->size = (size_t)rd_num(r, 0, INT64_MAX);
  b->offset = (size_t)rd_num(r, 0, INT64_MAX);
  b->space = (fn_mem_space)rd_num(r, FN_HOST, FN_DEVICE);
  b->first = (int)rd_num(r, -1, nker);
  b->last = (int)rd_num(r, -1, nker);
}

/* One kernel line over nbuf buffers. */
static void rd_kernel(ssm_rd *r, ut_arena *a, fn_kernel *k, int nbuf) {
  rd_tag(r, "k");
  k->region = (int)rd_num(r, 0, INT32_MAX);
  k->nreads = (int)rd_num(r, 0, nbuf);
  k->reads = ut_arena_alloc(a, sizeof(int) * ((size_t)k->nreads + 1));
  for (int i = 0; k->reads && i < k->nreads; i++) k->reads[i] = (int)rd_num(r, 0, nbuf - 1);
  k->nwrites = (int)rd_num(r, 0, nbuf);
  k->writes = ut_arena_alloc(a, sizeof(int) * ((size_t)k->nwrites + 1));
  for (int i = 0; k->writes && i < k->nwrites; i++) k->writes[i] = (int)rd_num(r, 0, nbuf - 1);
  size_t n = 0;
  const char *name = rd_rest(r, &n);
  if (!k->reads || !k->writes || !name || !(k->name = ut_arena_strndup(a, name, n))) r->ok = false;
}

/* The Function's records into a new *f for a model of nnodes nodes. */
static void rd_function(ssm_rd *r, int nnodes, fn_function **out) {
  fn_function *f = ut_xcalloc(1, sizeof *f);
  if (!f || !(f->arena = ut_arena_new())) return free(f), (void)(r->ok = false);
  *out = f;
  ut_arena *A = f->arena;
  rd_tag(r, "fn");
  f->name = "model";
  f->nbuffers = (int)rd_num(r, 1, nnodes);
  f->nkernels = (int)rd_num(r, 0, 1 << 20);
  f->nargs = (int)rd_num(r, 0, f->nbuffers);
  f->nret = (int)rd_num(r, 0, f->nbuffers);
  if (rd_num(r, nnodes, nnodes) != nnodes || !r->ok) return;
  f->required_memory = (size_t)rd_num(r, 0, INT64_MAX);
  f->const_bytes = (size_t)rd_num(r, 0, INT64_MAX);
  f->buffers = ut_arena_alloc(A, sizeof(fn_buffer) * ((size_t)f->nbuffers + 1));
  f->kernels = ut_arena_alloc(A, sizeof(fn_kernel) * ((size_t)f->nkernels + 1));
  if (!f->buffers || !f->kernels) return (void)(r->ok = false);
  for (int i = 0; i < f->nbuffers && r->ok; i++) {
    fn_buffer *b = &f->buffers[i];
    rd_buffer(r, b, i, nnodes, f->nkernels);
    if (b->kind == FN_PARAM && (b->offset > f->const_bytes || b->size > f->const_bytes - b->offset))
      r->ok = false; /* a weight must lie inside the ConstPool (fn_constpool_from_tensors copies it there) */
  }
  for (int i = 0; i < f->nkernels && r->ok; i++) rd_kernel(r, A, &f->kernels[i], f->nbuffers);
  f->args = rd_ints(r, A, "a", f->nargs, 0, f->nbuffers - 1);
  f->ret = rd_ints(r, A, "r", f->nret, 0, f->nbuffers - 1);
  f->buffer_of = rd_ints(r, A, "o", nnodes, -1, f->nbuffers - 1);
}

/* Whether text[0..len) ends in "sum <hash of what comes before>\n". */
static bool sum_ok(const char *text, size_t len) {
  if (len < 21 || text[len - 1] != '\n') return false;
  const char *s = text + len - 21; /* "sum " and 16 hex digits */
  if (strncmp(s, "sum ", 4)) return false;
  char want[20];
  snprintf(want, sizeof want, "%016" PRIx64, ut_hash64(text, (size_t)(s - text), 0x73756dull));
  return !strncmp(s + 4, want, 16);
}

bool rt_ssm_load(const char *path, int nnodes, int nsyms, rt_ssm *m) {
  memset(m, 0, sizeof *m);
  char *text = NULL;
  size_t len = 0;
  harp_error e = {0};
  if (ut_read_file(&e, path, SSM_MAX_BYTES, &text, &len)) return harp_error_clear(&e), false;
  ssm_rd r = {text, sum_ok(text, len)};
  rd_tag(&r, "harp-ssm");
  rd_num(&r, 2, 2);
  rd_tag(&r, "glo");
  m->nsyms = (int)rd_num(&r, nsyms, nsyms);
  for (int i = 0; i < nsyms && i < 64; i++) m->glo[i] = rd_num(&r, 1, INT64_MAX);
  rd_tag(&r, "quick");
  m->quick = rd_num(&r, 0, 1) == 1;
  while (r.ok && *r.p == ' ') r.p++;
  if (r.ok && *r.p == '\n' && !strncmp(r.p + 1, "so ", 3)) {
    rd_tag(&r, "so");
    size_t n = 0;
    const char *so = rd_rest(&r, &n);
    if (so && n < sizeof m->so && n > 3 && !memchr(so, '/', n)) memcpy(m->so, so, n), m->so[n] = 0;
    else r.ok = false;
    rd_function(&r, nnodes, &m->f);
  } else {
    rd_tag(&r, "fallback");
    size_t n = 0;
    const char *why = rd_rest(&r, &n);
    if (why && (m->fallback = ut_xmalloc(n + 1))) memcpy(m->fallback, why, n), m->fallback[n] = 0;
    else r.ok = false;
  }
  rd_tag(&r, "sum");
  free(text);
  if (!r.ok) rt_ssm_free(m);
  return r.ok;
}

/* ---- writing ------------------------------------------------------------------------- */

/* A growing text (ok false once out of memory). */
typedef struct ssm_wr {
  char *s;
  size_t n, cap;
  bool ok;
} ssm_wr;

static void wr(ssm_wr *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wr(ssm_wr *w, const char *fmt, ...) {
  for (int pass = 0; w->ok && pass < 2; pass++) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(w->s ? w->s + w->n : NULL, w->s ? w->cap - w->n : 0, fmt, ap);
    va_end(ap);
    if (k < 0) w->ok = false;
    else if (w->s && w->n + (size_t)k < w->cap) return (void)(w->n += (size_t)k);
    else { /* grow, then print again */
      size_t cap = (w->cap + (size_t)k + 1) * 2;
      char *s = realloc(w->s, cap);
      if (!s) w->ok = false;
      else w->s = s, w->cap = cap;
    }
  }
}

/* n ints after tag, one line. */
static void wr_ints(ssm_wr *w, const char *tag, const int *v, int n) {
  wr(w, "%s", tag);
  for (int i = 0; i < n; i++) wr(w, " %d", v[i]);
  wr(w, "\n");
}

/* f's records (names must hold no blank or line break: else !ok). */
static void wr_function(ssm_wr *w, const fn_function *f, int nnodes) {
  wr(w, "fn %d %d %d %d %d %zu %zu\n", f->nbuffers, f->nkernels, f->nargs, f->nret, nnodes, f->required_memory, f->const_bytes);
  for (int i = 0; i < f->nbuffers; i++) {
    const fn_buffer *b = &f->buffers[i];
    if (b->id != i) w->ok = false;
    wr(w, "b %d %d %d %" PRId64 " %zu %zu %d %d %d\n", b->node, (int)b->kind, (int)b->dtype, b->numel, b->size, b->offset,
       (int)b->space, b->first, b->last);
  }
  for (int i = 0; i < f->nkernels; i++) {
    const fn_kernel *k = &f->kernels[i];
    if (!k->name || !k->name[0] || strpbrk(k->name, " \n")) w->ok = false;
    wr(w, "k %d %d", k->region, k->nreads);
    for (int j = 0; j < k->nreads; j++) wr(w, " %d", k->reads[j]);
    wr(w, " %d", k->nwrites);
    for (int j = 0; j < k->nwrites; j++) wr(w, " %d", k->writes[j]);
    wr(w, " %s\n", k->name ? k->name : "");
  }
  wr_ints(w, "a", f->args, f->nargs);
  wr_ints(w, "r", f->ret, f->nret);
  wr_ints(w, "o", f->buffer_of, nnodes);
}

harp_status rt_ssm_store(harp_error *e, const char *path, const rt_ssm *m, int nnodes) {
  ssm_wr w = {.ok = true};
  wr(&w, "harp-ssm 2\nglo %d", m->nsyms);
  for (int i = 0; i < m->nsyms; i++) wr(&w, " %" PRId64, m->glo[i]);
  wr(&w, "\nquick %d", m->quick ? 1 : 0);
  if (m->fallback) {
    wr(&w, "\nfallback ");
    for (const char *c = m->fallback; *c; c++) wr(&w, "%c", *c == '\n' ? ' ' : *c);
    wr(&w, "\n");
  } else {
    wr(&w, "\nso %s\n", m->so);
    wr_function(&w, m->f, nnodes);
  }
  if (w.ok) wr(&w, "sum %016" PRIx64 "\n", ut_hash64(w.s, w.n, 0x73756dull));
  harp_status st = w.ok ? ut_write_file_atomic(e, path, w.s, w.n)
                        : ut_fail(e, HARP_E_INTERNAL, NULL, "the ShapeSet manifest cannot be written (a name with a blank)");
  free(w.s);
  return st;
}

void rt_ssm_free(rt_ssm *m) {
  fn_free(m->f);
  free(m->fallback);
  memset(m, 0, sizeof *m);
}
