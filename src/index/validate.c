/* validate.c — the MissingDivGuard check of seed 000 §13.
 * Needs: a built IndexBook.  Gives: ib_validate.
 *
 * Every `%` that survived simplification was expanded into
 * r = e - q*floor(e/q); the node's domain must then hold the guard
 * 0 <= r <= q-1 (seed 000 §3.2).  The guard is implied by floor semantics,
 * but later layers that split pieces or drop divisions rely on it being
 * explicit, so its absence is an error, not something to repair. */
#include <stdlib.h>

#include "index/ib_int.h"
#include "util/util.h"

static bool has_cons(const ib_info *f, const ib_aff *e) {
  for (int i = 0; i < f->ncons; i++)
    if (!f->cons[i].eq && ib_aff_cmp(&f->cons[i].e, e) == 0) return true;
  return false;
}

harp_status ib_validate(harp_error *e, const ib_book *b) {
  for (int n = 0; n < b->n; n++) {
    const ib_info *f = &b->info[n];
    if (!f->nmods) continue;
    ib_env env;
    ib_env_for(b, n, e, &env);
    for (int m = 0; m < f->nmods; m++) {
      ib_aff r, hi;
      bool made;
      if (ib_aff_mod(&env, &r, &f->mods[m].e, f->mods[m].q, &made)) return e->code;
      ib_aff_const(&hi, f->mods[m].q - 1);
      if (ib_aff_add(&env, &hi, &r, -1)) return e->code;
      if (has_cons(f, &r) && has_cons(f, &hi)) continue;
      const char *names[IB_MAX_VARS];
      ib_var_names(f, names);
      ut_str s;
      ut_str_init(&s);
      ib_aff_print(&s, &f->mods[m].e, names);
      char *t = ut_str_take(&s);
      ut_fail(e, HARP_E_MISSING_DIV_GUARD, b->g->nodes[n].id,
              "(%s) mod %lld was expanded into a floor division but the domain lacks its guard 0 <= r < %lld",
              t ? t : "?", (long long)f->mods[m].q, (long long)f->mods[m].q);
      free(t);
      return e->code;
    }
  }
  return HARP_OK;
}
