/* calib_wf.c — the calibration's Winograd filter transform: the loop
 * cgen_wino.c's emit_wpack emits (U = G g G^T per output and input channel
 * in scalar double, stored as Up[t][ob][c][MR]), to time how fast this core
 * transforms a weight that is no model parameter (the kernel does it on
 * every call).  Needs: nothing but libc.  Gives: rt_calib_wf_run.
 *
 * F(4x4, 3x3) (6 x 6 points) with MR = 12 output channels a block, the
 * layout of the AVX-512 kernel; its cost per multiply-add (a*9 + a*a*3 a
 * filter) is the figure, F(2x2)'s rate per multiply-add being about the
 * same (one thread: 0.18 vs 0.21 ns in L2, 0.42 vs 0.43 beyond it). */
#include <stdbool.h>
#include <stddef.h>

#include "calib.h"

#define WF_A 6
#define WF_MR 12

static const double G4[WF_A][3] = {{1. / 4, 0, 0},
                                   {-1. / 6, -1. / 6, -1. / 6},
                                   {-1. / 6, 1. / 6, -1. / 6},
                                   {1. / 24, 1. / 12, 1. / 6},
                                   {1. / 24, -1. / 12, 1. / 6},
                                   {0, 0, 1}};

/* Output-channel block `task` of an oc x c weight w[oc][c][3][3] into up
 * (nob blocks), as the generated wtask does it. */
static void wf_task(const float *w, float *up, long oc_n, long c_n, long nob, long task) {
  for (long c = 0; c < c_n; c++) {
    float u[WF_A * WF_A][WF_MR];
    for (int r = 0; r < WF_MR; r++) {
      long oc = task * WF_MR + r;
      double g[3][3], tg[WF_A][3];
      for (int k = 0; k < 9; k++) g[k / 3][k % 3] = oc < oc_n ? w[(oc * c_n + c) * 9 + k] : 0.0;
      for (int i = 0; i < WF_A; i++)
        for (int j = 0; j < 3; j++) tg[i][j] = G4[i][0] * g[0][j] + G4[i][1] * g[1][j] + G4[i][2] * g[2][j];
      for (int i = 0; i < WF_A; i++)
        for (int j = 0; j < WF_A; j++)
          u[i * WF_A + j][r] = (float)(tg[i][0] * G4[j][0] + tg[i][1] * G4[j][1] + tg[i][2] * G4[j][2]);
    }
    for (int t = 0; t < WF_A * WF_A; t++)
      for (int r = 0; r < WF_MR; r++) up[((t * nob + task) * c_n + c) * WF_MR + r] = u[t][r];
  }
}

long rt_calib_wf_up_floats(long ch) { return (long)WF_A * WF_A * ((ch + WF_MR - 1) / WF_MR) * WF_MR * ch; }

double rt_calib_wf_run(const float *w, float *up, long ch) {
  long nob = (ch + WF_MR - 1) / WF_MR;
  for (long t = 0; t < nob; t++) wf_task(w, up, ch, ch, nob, t);
  return (double)ch * (double)ch * (WF_A * 9 + WF_A * WF_A * 3);
}
