/* q8_hold.c — which int8 activations stay bytes between int8 kernels
 * (contract_c.h's cc_q8_plan): the decision over the Function, from what
 * the int8 kernels were (contract_q8.c records a cc_q8_fact per kernel),
 * and the check that the kernels emitted holding a buffer all did.
 * The layout of a held buffer's bytes: NCHW, or VNNI-4 where its writer
 * and readers all can (cc_q8_plan.v4).
 * Needs: contract_c.h, the Function.  Gives: cc_q8_plan_new / _free /
 * _decide / _kept / _clear. */
#include <stdlib.h>
#include <string.h>

#include "contract_c.h"

cc_q8_plan *cc_q8_plan_new(const fn_function *f) {
  cc_q8_plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->nk = f->nkernels, p->nb = f->nbuffers;
  p->k = calloc((size_t)p->nk + 1, sizeof *p->k);
  p->hold = malloc(sizeof(int) * ((size_t)p->nb + 1));
  p->v4 = calloc((size_t)p->nb + 1, sizeof *p->v4);
  if (!p->k || !p->hold || !p->v4) {
    cc_q8_plan_free(p);
    return NULL;
  }
  cc_q8_plan_clear(p);
  return p;
}

void cc_q8_plan_free(cc_q8_plan *p) {
  if (!p) return;
  free(p->k);
  free(p->hold);
  free(p->v4);
  free(p);
}

void cc_q8_plan_clear(cc_q8_plan *p) {
  for (int b = 0; b < p->nb; b++) p->hold[b] = -1, p->v4[b] = false;
  for (int k = 0; k < p->nk; k++) p->k[k] = (cc_q8_fact){.xbuf = -1, .ybuf = -1, .zo = -1};
}

/* Whether kernel k of f reads (w: writes) buffer b. */
static bool touches(const fn_function *f, int k, int b, bool w) {
  const fn_kernel *K = &f->kernels[k];
  const int *ids = w ? K->writes : K->reads;
  for (int i = 0; i < (w ? K->nwrites : K->nreads); i++)
    if (ids[i] == b) return true;
  return false;
}

/* The zero point buffer b may hold its bytes at, or -1: a temporary that
 * one kernel writes as its requantized output (an int8 kernel's, or a map
 * kernel's proven 8-bit: cc_q8_fact.qmap) and that at least one other
 * reads, every reader an int8 kernel taking b whole as its input or as the
 * tensor its output pass adds (cc_q8_fact.rbuf). */
static int holdable(const cc_q8_plan *p, const fn_function *f, int b) {
  if (f->buffers[b].kind != FN_TEMP) return -1;
  int writer = -1, readers = 0;
  for (int k = 0; k < f->nkernels; k++) {
    if (touches(f, k, b, true)) {
      if (writer >= 0 || !(p->k[k].q8 || p->k[k].cand || p->k[k].qmap) || p->k[k].ybuf != b || p->k[k].zo < 0) return -1;
      writer = k;
    }
    if (touches(f, k, b, false)) {
      const cc_q8_fact *q = &p->k[k];
      if (!(q->q8 || q->cand) || !(q->xbuf == b || (q->has_r && q->rbuf == b)) || k == writer) return -1;
      readers++;
    }
  }
  if (writer < 0 || !readers) return -1;
  const cc_q8_fact *w = &p->k[writer]; /* each reader takes the bytes as written: scaled, at the zero point it needs */
  for (int k = 0; k < f->nkernels; k++)
    if (k != writer && touches(f, k, b, false) &&
        (p->k[k].xbuf == b ? p->k[k].xs != w->ys || (p->k[k].pair && p->k[k].xz != w->zo) : w->ys != 0))
      return -1;
  return w->zo;
}

/* Whether held buffer b may hold its bytes VNNI-4 (cc_q8_plan.v4): its
 * writer can write them so, every reader can read them so as its input. */
static bool v4_ok(const cc_q8_plan *p, const fn_function *f, int b) {
  for (int k = 0; k < f->nkernels; k++) {
    const cc_q8_fact *q = &p->k[k];
    if (touches(f, k, b, true) && !q->v4w) return false;
    if (touches(f, k, b, false) && !(q->v4r && q->xbuf == b && !(q->has_r && q->rbuf == b))) return false;
  }
  return true;
}

/* The buffers held, the candidates (cc_q8_fact.cand) counted as int8
 * kernels; then those that would still not pay with what they hold are
 * struck off, and so on until none is. */
bool cc_q8_plan_decide(cc_q8_plan *p, const fn_function *f) {
  bool any = false, changed = true;
  while (changed) {
    any = changed = false;
    for (int b = 0; b < p->nb; b++) any |= (p->hold[b] = holdable(p, f, b)) >= 0;
    for (int k = 0; k < p->nk; k++) {
      cc_q8_fact *q = &p->k[k];
      bool hin = q->xbuf >= 0 && p->hold[q->xbuf] >= 0, hout = q->ybuf >= 0 && p->hold[q->ybuf] >= 0;
      if (q->cand && !cc_q8_pays(q->mnk, hin ? 0 : q->xel, hout ? 0 : q->yel)) q->cand = false, changed = true;
      if (q->pair && q->q8 && !(hin && hout)) q->q8 = false, changed = true; /* both sides held, or neither */
    }
  }
  for (int b = 0; b < p->nb; b++) p->v4[b] = p->hold[b] >= 0 && v4_ok(p, f, b);
  for (int k = 0; k < p->nk; k++) p->k[k] = (cc_q8_fact){.xbuf = -1, .ybuf = -1, .zo = -1};
  return any;
}

bool cc_q8_plan_kept(const cc_q8_plan *p, const fn_function *f) {
  for (int b = 0; b < p->nb; b++) {
    if (p->hold[b] < 0) continue;
    for (int k = 0; k < f->nkernels; k++) {
      if (touches(f, k, b, true) && !(p->k[k].held_out && p->k[k].ybuf == b && p->k[k].v4_out == p->v4[b])) return false;
      const cc_q8_fact *q = &p->k[k];
      if (touches(f, k, b, false) && p->v4[b] && !(q->v4_in && q->xbuf == b)) return false;
      if (touches(f, k, b, false) && !((q->held_in && q->xbuf == b) || (q->held_res && q->has_r && q->rbuf == b))) return false;
    }
  }
  return true;
}
