/* flow.c — the host program of a model with run-time control flow
 * (harp/flow.h): growing its tables while the ONNX importer builds it,
 * freeing it, and the text of `--dump flow`.
 * Needs: the frontend (programs).  Gives: flow_free, flow_describe,
 * flow_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flow_int.h"
#include "util/util.h"

/* Room for one more element of size sz in *a (count n, capacity *cap). */
static bool grow(void **a, int n, int *cap, size_t sz) {
  if (n < *cap) return true;
  int c = *cap ? 2 * *cap : 8;
  void *p = ut_xrealloc(*a, sz * (size_t)c);
  if (!p) return false;
  memset((char *)p + sz * (size_t)n, 0, sz * (size_t)(c - n));
  *a = p, *cap = c;
  return true;
}

static char *dup(const char *s) {
  char *d = ut_xmalloc(strlen(s ? s : "") + 1);
  if (d) strcpy(d, s ? s : "");
  return d;
}

int flow_add_slot(flow_program *f, const char *name, tiny_dtype dt, int rank) {
  if (!grow((void **)&f->slots, f->nslots, &f->slotcap, sizeof *f->slots)) return -1;
  flow_slot *s = &f->slots[f->nslots];
  memset(s, 0, sizeof *s);
  if (!(s->name = dup(name))) return -1;
  s->dtype = dt, s->rank = rank, s->weight = -1;
  for (int i = 0; i < TINY_MAX_RANK; i++) s->dims[i] = -1;
  return f->nslots++;
}

int flow_add_seg(flow_program *f, hg_program *p) {
  if (!grow((void **)&f->segs, f->nsegs, &f->segcap, sizeof *f->segs)) {
    hg_program_free(p);
    return -1;
  }
  memset(&f->segs[f->nsegs], 0, sizeof *f->segs);
  f->segs[f->nsegs].program = p;
  return f->nsegs++;
}

int flow_add_step(flow_program *f, flow_kind kind, const char *where) {
  if (!grow((void **)&f->steps, f->nsteps, &f->stepcap, sizeof *f->steps)) return -1;
  flow_step *s = &f->steps[f->nsteps];
  memset(s, 0, sizeof *s);
  s->kind = kind, s->seg = -1, s->body[0] = s->body[1] = -1;
  if (!(s->where = dup(where))) return -1;
  return f->nsteps++;
}

int flow_add_block(flow_program *f) {
  if (!grow((void **)&f->blocks, f->nblocks, &f->blockcap, sizeof *f->blocks)) return -1;
  memset(&f->blocks[f->nblocks], 0, sizeof *f->blocks);
  return f->nblocks++;
}

bool flow_push(int **a, int *n, int v) {
  int *p = ut_xrealloc(*a, sizeof *p * (size_t)(*n + 1));
  if (!p) return false;
  p[(*n)++] = v;
  *a = p;
  return true;
}

bool flow_push_str(char ***a, int n, const char *s) {
  char **p = ut_xrealloc(*a, sizeof *p * (size_t)(n + 1));
  if (!p) return false;
  *a = p;
  return (p[n] = dup(s)) != NULL;
}

static void slot_free(flow_slot *s) {
  free(s->name);
  for (int i = 0; i < TINY_MAX_RANK; i++) free(s->sym[i]);
  ut_tensor_free(&s->konst);
}

static void seg_free(flow_seg *s) {
  hg_program_free(s->program);
  for (int i = 0; i < s->nin; i++) free(s->in_id[i]);
  for (int i = 0; i < s->nout; i++) free(s->out_id[i]);
  free(s->in), free(s->in_id), free(s->out), free(s->out_id);
}

static void step_free(flow_step *s) {
  free(s->where), free(s->in), free(s->out);
  free(s->in_axis), free(s->in_rev), free(s->out_axis), free(s->out_rev);
}

static void block_free(flow_block *b) {
  for (int i = 0; b->in_name && i < b->nin; i++) free(b->in_name[i]);
  for (int i = 0; b->out_name && i < b->nout; i++) free(b->out_name[i]);
  free(b->in_name), free(b->out_name);
  free(b->steps), free(b->in), free(b->out);
}

/* Segments free their programs last: an earlier segment's arena holds
 * dims a later one points to (the importer's shape constants). */
void flow_truncate(flow_program *f, int nslots, int nsegs, int nsteps, int nblocks) {
  for (; f->nslots > nslots; f->nslots--) slot_free(&f->slots[f->nslots - 1]);
  for (; f->nsteps > nsteps; f->nsteps--) step_free(&f->steps[f->nsteps - 1]);
  for (; f->nblocks > nblocks; f->nblocks--) block_free(&f->blocks[f->nblocks - 1]);
  for (; f->nsegs > nsegs; f->nsegs--) seg_free(&f->segs[f->nsegs - 1]);
}

void flow_free(flow_program *f) {
  if (!f) return;
  flow_truncate(f, 0, 0, 0, 0);
  free(f->slots), free(f->segs), free(f->steps), free(f->blocks);
  free(f);
}

/* ---- --dump flow -------------------------------------------------------------------- */
static void slot_list(ut_str *s, const flow_program *f, const int *v, int n) {
  ut_str_putc(s, '[');
  for (int i = 0; i < n; i++) {
    if (i) ut_str_puts(s, ", ");
    if (v[i] < 0) {
      ut_str_puts(s, "-");
      continue;
    }
    const flow_slot *sl = &f->slots[v[i]];
    ut_str_printf(s, "%%%d", v[i]);
    if (sl->has_konst) ut_str_puts(s, "=const");
    else if (sl->weight >= 0) ut_str_puts(s, "=weight");
  }
  ut_str_putc(s, ']');
}

static void describe_block(ut_str *s, const flow_program *f, int b, int depth);

static void describe_step(ut_str *s, const flow_program *f, int k, int depth) {
  const flow_step *st = &f->steps[k];
  static const char *const kind[] = {"seg", "If", "Loop", "Scan", "fail", "op"};
  ut_str_printf(s, "%*s%s", 2 * depth, "", kind[st->kind]);
  if (st->kind == FLOW_OP) ut_str_printf(s, " %s", flow_op_name(st->op));
  if (st->kind == FLOW_FAIL) {
    ut_str_printf(s, " [%s] %s\n", harp_status_name(st->code), st->where);
    return;
  }
  if (st->kind == FLOW_SEG) {
    const flow_seg *g = &f->segs[st->seg];
    ut_str_printf(s, " %d ", st->seg);
    slot_list(s, f, g->in, g->nin);
    ut_str_puts(s, " -> ");
    slot_list(s, f, g->out, g->nout);
    ut_str_putc(s, '\n');
    return;
  }
  ut_str_printf(s, " %s ", st->where);
  slot_list(s, f, st->in, st->nin);
  ut_str_puts(s, " -> ");
  slot_list(s, f, st->out, st->nout);
  ut_str_putc(s, '\n');
  for (int i = 0; i < 2; i++)
    if (st->body[i] >= 0) {
      ut_str_printf(s, "%*s%s:\n", 2 * depth + 1, "", st->kind != FLOW_IF ? "body" : i ? "else" : "then");
      describe_block(s, f, st->body[i], depth + 1);
    }
}

static void describe_block(ut_str *s, const flow_program *f, int b, int depth) {
  const flow_block *bl = &f->blocks[b];
  if (bl->nin) {
    ut_str_printf(s, "%*sin ", 2 * depth, "");
    slot_list(s, f, bl->in, bl->nin);
    ut_str_putc(s, '\n');
  }
  for (int i = 0; i < bl->nsteps; i++) describe_step(s, f, bl->steps[i], depth);
  ut_str_printf(s, "%*sout ", 2 * depth, "");
  slot_list(s, f, bl->out, bl->nout);
  ut_str_putc(s, '\n');
}

char *flow_describe(const flow_program *f) {
  ut_str s;
  ut_str_init(&s);
  ut_str_printf(&s, "host program: %d segments, %d slots\n", f->nsegs, f->nslots);
  describe_block(&s, f, f->main, 0);
  if (s.oom) {
    ut_str_free(&s);
    return NULL;
  }
  return ut_str_take(&s);
}
