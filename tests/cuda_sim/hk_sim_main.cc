/* hk_sim_main.cc — the launcher of the CPU SIMT simulator (tests only).
 * Linked with one generated translation unit (compiled with -DHK_SIM
 * -include hk_sim.h) into a program that runs a job file:
 *
 *   buf ID BYTES INFILE|-        allocate; fill from a raw file, or poison (0xFF)
 *   launch KERNEL GX GY GZ BX BY BZ SMEM NPARAMS P...
 *       P = bID (the buffer) | bID+OFF (OFF bytes into it) | mID (a tensor map
 *       blob, see hk_sim.h; its v[15] is a byte offset into its tensor) | 0 (NULL)
 *       | vINT (a long passed by value: a size read at run time)
 *   out ID OUTFILE               after all launches, write the buffer
 *   reverse                      run every launch's CTAs last to first
 * IDs are 0..MAX_BUFS-1.
 *
 * and prints "hk_sim_stats ldsm=.. conflicts=.. mma=.. cp_bytes=.. barriers=.."
 * on success.  Exit 3 on a simulation error (message on stderr), 2 on a bad job. */
#include <dlfcn.h>

#include <algorithm>
#include <string>

hks::Sim *hks::g;

static void fiber_entry() {
  hks::Sim *s = hks::g;
  void (*thunk)(void **) = (void (*)(void **))s->thunk_fn;
  thunk(s->params);
  hks::thread_exit_checks();
  s->f[s->cur].done = true;
  s->progress = true;
}

extern "C" void hk_sim_add_buffer(const void *p, size_t n, const char *name) {
  hks::g->bufs.push_back({(const unsigned char *)p, n, name});
}

extern "C" void hk_sim_stats(unsigned long long out[5]) {
  out[0] = hks::g->ldsm, out[1] = hks::g->ldsm_conflicts, out[2] = hks::g->mma, out[3] = hks::g->cp_bytes;
  out[4] = hks::g->barriers;
}

extern "C" int hk_sim_launch(const char *kernel, void (*thunk)(void **), const unsigned grid[3], const unsigned block[3],
                             size_t smem, void **params, unsigned long long seed) {
  hks::Sim *s = hks::g;
  s->kernel = kernel;
  s->grid = {grid[0], grid[1], grid[2]};
  s->block = {block[0], block[1], block[2]};
  s->thunk_fn = (void *)thunk;
  s->params = params;
  s->rng = seed * 2654435761ULL + 1;
  /* the dynamic shared memory's address: 128-byte aligned (the kernels
   * declare that much), never 1024-byte aligned */
  s->smem_base = 128u * (1u + hks::rnd() % 7u);
  s->lb_threads = s->lb_blocks = 0;
  unsigned nt = block[0] * block[1] * block[2];
  if (nt == 0 || nt % 32) {
    fprintf(stderr, "hk_sim: block of %u threads is not a whole number of warps\n", nt);
    return 2;
  }
  const size_t stack_size = 256 * 1024;
  s->f.assign(nt, hks::Fiber());
  for (unsigned i = 0; i < nt; i++) {
    s->f[i].stack = (char *)malloc(stack_size);
    s->f[i].tid = i;
    s->f[i].tidx = {i % block[0], (i / block[0]) % block[1], i / (block[0] * block[1])};
  }
  s->warps.assign(nt / 32, hks::Warp());
  std::vector<unsigned> order(nt);
  for (unsigned bz = 0; bz < grid[2]; bz++)
    for (unsigned by = 0; by < grid[1]; by++)
      for (unsigned bx = 0; bx < grid[0]; bx++) {
        s->bidx = s->reverse_ctas ? hks::dim3s{grid[0] - 1 - bx, grid[1] - 1 - by, grid[2] - 1 - bz} : hks::dim3s{bx, by, bz};
        s->smem.assign(s->smem_base + smem, 0xFF);
        s->gw_tid.assign(s->smem.size(), 0);
        s->gw_stamp.assign(s->smem.size(), 0);
        s->stamp = 0;
        s->reg_pool = 0;
        s->wregs.assign(nt / 32, hks::WarpRegs{0, 0, 0, 0, false, 0});
        s->wg_nreg.assign(nt / 128 + 1, std::vector<int>());
        for (auto &w : s->warps) w = hks::Warp();
        s->bar_arrived = 0;
        s->mbars.clear();
        for (auto &nb : s->named) nb = hks::NamedBar();
        s->wgs.assign(4, hks::Wg()); /* sized up front: a waiting warpgroup holds a reference */
        for (unsigned i = 0; i < nt; i++) {
          hks::Fiber &f = s->f[i];
          f.reset();
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack;
          f.ctx.uc_stack.ss_size = stack_size;
          f.ctx.uc_link = &s->sched;
          makecontext(&f.ctx, fiber_entry, 0);
          order[i] = i;
        }
        int idle = 0;
        for (;;) {
          for (unsigned i = nt - 1; i > 0; i--) std::swap(order[i], order[hks::rnd() % (i + 1)]);
          s->progress = false;
          unsigned alive = 0;
          for (unsigned i : order) {
            if (s->f[i].done) continue;
            alive++;
            s->cur = (int)i;
            swapcontext(&s->sched, &s->f[i].ctx);
          }
          s->cur = -1;
          if (!alive) {
            hks::cta_end_checks();
            break;
          }
          if (!s->progress && ++idle > 2) {
            unsigned done = 0;
            for (auto &f : s->f) done += f.done;
            fprintf(stderr, "hk_sim: error: kernel %s block (%u,%u,%u): deadlock (%u threads exited, %d at a barrier)\n",
                    kernel, bx, by, bz, done, s->bar_arrived);
            std::vector<std::pair<std::string, std::vector<unsigned>>> at; /* who waits where */
            for (auto &f : s->f)
              if (!f.done) {
                std::string w = f.at ? f.at : "?";
                size_t j = 0;
                while (j < at.size() && at[j].first != w) j++;
                if (j == at.size()) at.push_back({w, {}});
                at[j].second.push_back(f.tid);
              }
            for (auto &a : at)
              fprintf(stderr, "hk_sim:   %zu thread(s) waiting at %s (first: thread %u)\n", a.second.size(), a.first.c_str(),
                      a.second[0]);
            return 3;
          }
          if (s->progress) idle = 0;
        }
        /* copies still in flight land anyway */
        for (auto &f : s->f)
          for (auto &grp : f.groups)
            for (auto &c : grp) hks_cp_land(c);
      }
  for (auto &f : s->f) free(f.stack);
  s->f.clear();
  return 0;
}

static int bad_job(const char *why, const char *arg) {
  fprintf(stderr, "hk_sim: bad job: %s %s\n", why, arg ? arg : "");
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return bad_job("usage: sim JOBFILE [SEED]", nullptr);
  hks::Sim sim = {};
  hks::g = &sim;
  unsigned long long seed = argc > 2 ? strtoull(argv[2], nullptr, 10) : 1;
  FILE *jf = fopen(argv[1], "r");
  if (!jf) return bad_job("cannot open", argv[1]);
  const int MAX_BUFS = 512;
  std::vector<std::vector<unsigned char>> bufs(MAX_BUFS);
  std::vector<std::pair<int, std::string>> outs;
  char line[4096];
  int nlaunch = 0;
  while (fgets(line, sizeof line, jf)) {
    char cmd[32], a1[1024], a2[1024];
    if (sscanf(line, "%31s", cmd) != 1 || cmd[0] == '#') continue;
    if (!strcmp(cmd, "reverse")) {
      sim.reverse_ctas = true;
    } else if (!strcmp(cmd, "buf")) {
      int id;
      size_t n;
      if (sscanf(line, "%*s %d %zu %1023s", &id, &n, a1) != 3 || id < 0 || id >= MAX_BUFS) return bad_job("buf", line);
      bufs[id].assign(n + 64, 0xFF); /* slack keeps the pointer valid for size 0 */
      if (strcmp(a1, "-")) {
        FILE *f = fopen(a1, "rb");
        if (!f || fread(bufs[id].data(), 1, n, f) != n) return bad_job("cannot read", a1);
        fclose(f);
      }
      hk_sim_add_buffer(bufs[id].data(), n, "buffer");
    } else if (!strcmp(cmd, "out")) {
      int id;
      if (sscanf(line, "%*s %d %1023s", &id, a2) != 2 || id < 0 || id >= MAX_BUFS) return bad_job("out", line);
      outs.push_back({id, a2});
    } else if (!strcmp(cmd, "launch")) {
      unsigned gr[3], bl[3];
      size_t smem;
      int np, off = 0;
      char kname[256];
      if (sscanf(line, "%*s %255s %u %u %u %u %u %u %zu %d%n", kname, &gr[0], &gr[1], &gr[2], &bl[0], &bl[1], &bl[2],
                 &smem, &np, &off) != 9 || np < 0 || np > 64)
        return bad_job("launch", line);
      std::vector<void *> vals(np), ptrs(np);
      const char *p = line + off;
      for (int i = 0; i < np; i++) {
        char tok[64];
        int used;
        if (sscanf(p, "%63s%n", tok, &used) != 1) return bad_job("params", line);
        p += used;
        int id = atoi(tok + 1);
        const char *plus = strchr(tok, '+');
        size_t off = plus ? strtoull(plus + 1, nullptr, 10) : 0;
        if ((tok[0] == 'b' || tok[0] == 'm') && (id < 0 || id >= MAX_BUFS || bufs[id].empty() || off > bufs[id].size() - 64))
          return bad_job("param", tok);
        vals[i] = tok[0] == 'b' ? (void *)(bufs[id].data() + off) : nullptr;
        if (tok[0] == 'v') vals[i] = (void *)(intptr_t)strtoll(tok + 1, nullptr, 10); /* a long by value (a size) */
        ptrs[i] = &vals[i];
        if (tok[0] == 'm') { /* a tensor map passed by value: patch v[1] (buffer id) + v[15] into the pointer */
          hk_u64 *v = (hk_u64 *)bufs[id].data();
          if (v[0] != hks::TMAP_MAGIC || v[1] >= (hk_u64)MAX_BUFS || bufs[v[1]].empty()) return bad_job("tensor map", tok);
          v[1] = (hk_u64)(uintptr_t)(bufs[v[1]].data() + v[15]);
          ptrs[i] = v;
        }
      }
      std::string sym = std::string("hk_thunk_") + kname;
      void *fn = dlsym(RTLD_DEFAULT, sym.c_str());
      if (!fn) return bad_job("no kernel", kname);
      int r = hk_sim_launch(kname, (void (*)(void **))fn, gr, bl, smem, ptrs.data(), seed + (unsigned long long)nlaunch++);
      if (r) return r;
    }
  }
  fclose(jf);
  for (auto &o : outs) {
    FILE *f = fopen(o.second.c_str(), "wb");
    size_t n = bufs[o.first].size() - 64;
    if (!f || fwrite(bufs[o.first].data(), 1, n, f) != n) return bad_job("cannot write", o.second.c_str());
    fclose(f);
  }
  printf("hk_sim_stats ldsm=%llu conflicts=%llu mma=%llu cp_bytes=%llu barriers=%llu wgmma=%llu tma_bytes=%llu\n", sim.ldsm,
         sim.ldsm_conflicts, sim.mma, sim.cp_bytes, sim.barriers, sim.wgmma, sim.tma_bytes);
  return 0;
}
