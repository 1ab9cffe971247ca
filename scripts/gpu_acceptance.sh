#!/usr/bin/env bash
# gpu_acceptance.sh — the GPU part of harp's acceptance in one command, on a
# machine with an NVIDIA GPU, CUDA (NVRTC, cuBLAS), CMake, gcc and Python
# with numpy:
#
#   scripts/gpu_acceptance.sh [STEP...]
#        STEP: build gputests models tests gemm gemm32 sweep splitk plans winograd tune graphs shapes attn sanitize e2e
#        (default: build gputests models gemm gemm32 plans winograd tune graphs shapes)
#
# build     Release build in build-gpu/ (16 jobs; BUILD_TARGETS: only those)
# gputests  the ctest tests that touch CUDA (-R 'cuda|gpu|bench_cli', or $GPU_TESTS); the
#           interpreter is the reference (seed 000 §9: rtol = atol = 1e-3)
# tests     every ctest test
# models    test_cuda_gpu once per test model (HARP_GPU_MODEL), each in its
#           own process, so that a faulting kernel shows which model it is;
#           a failing one again under compute-sanitizer (memcheck)
# gemm      fp16 and bf16 GEMM 4096³ and 8192³, SM80 and SM90 templates vs
#           cuBLAS in the same run, checked against cuBLAS (bench/cuda_gemm.c),
#           one process per point
# gemm32    fp32 GEMMs 4096³ and 8192³, B row-major (nn) and K-major (tn):
#           harp TF32 (SM80 mma.sync, SM90 wgmma) vs cuBLAS TF32, harp's
#           strict-fp32 SIMT template vs cuBLAS SGEMM (GEMM32_N: the sizes)
# attn      attention, harp vs PyTorch SDPA (flash, cuDNN, efficient, math)
#           at sequence 1k-16k, head dim 64 and 128, causal and not, fp16
#           and fp32 (bench/cuda_attn.py; ATTN_ARGS)
# sanitize  compute-sanitizer memcheck over test_cuda_gpu's fp32 kernels
#           (TF32 GEMM / conv / attention, SIMT, fp16-rounded, wgmma .tf32),
#           then whole models on sm90: fp32 weights packed once, an input B
#           packed every run, the online-softmax attention
# sweep     SM90 tiles (BN, stages) at fp16/bf16 8192³ ($SWEEP_N), one process each
# sweep32   fp32: SM80 TF32 tiles (warp tile, BK), SM90 TF32, SIMT at 4096³ ($SWEEP_N)
# splitk    skinny GEMMs: the cost model's split-K plan, no split-K and each
#           form forced, vs cuBLAS through PyTorch (bench/cuda_splitk.py)
# e2e       whole models (ResNet-18/50, a BERT layer and BERT-base, a LLaMA
#           decoder layer prefill and decode, a gated MLP; fp32 and fp16)
#           exported from PyTorch to ONNX, harp vs PyTorch eager and
#           torch.compile (bench/cuda_e2e.py; E2E_ARGS, e.g. "--only ...")
# plans     the Plan decides every GPU kernel (issue 27): test_cuda_plan_fields (each
#           plan field changes the kernel; simulator + NVRTC), then bench/cuda_plans.py:
#           ResNet-size fp16 convs (one long-K, split by default) and an attention under
#           the default plan and overrides differing in tile / stages / warp tile /
#           split-K / softmax algorithm, each run on the device vs the CPU backend,
#           checked applied in plan.json, and timed (PLANS_TARGET, default sm90)
# winograd  Winograd on the GPU (issue 27, cuda_wino.c): test_cuda_winograd (simulator +
#           NVRTC), then bench/cuda_winograd.py: fp16 3x3 convs of VGG-19 / ResNet-50 sizes as
#           implicit GEMM, winograd_2x2_3x3 and winograd_4x4_3x3 (--plan) and cuDNN through
#           PyTorch, rounds interleaved, each harp point checked against PyTorch fp64 and
#           applied in plan.json (WINO_TARGET, default sm90; WINO_ARGS).  Unmeasured until
#           this runs: the default plan stays implicit GEMM until it shows Winograd wins
# tune      `harp tune --backend cuda` (issue 27): the measured plan search on the
#           device for an fp16 GEMM, a skinny one and an fp16 3x3 conv (budget 12,
#           repeat 20, points interleaved, device events), logged to tune.csv in $OUT,
#           plans cached in a private cache; then `harp run --backend cuda --dump plan`
#           must read the cached plan back ("source": "cache") for the same ShapeSet
# graphs    host overhead: launches one by one vs one CUDA Graph replay, and a
#           session over four batch sizes (bench/cuda_graphs.sh)
# shapes    issue 25's GPU figures (bench/cuda_shapeset.py, the e2e model set as
#           ShapeSets: ResNet-18, MobileNetV2, a LLaMA layer, a transformer block):
#           one CUDA Graph per ShapeSet serving 3 bindings with one build (the
#           session's counters checked), the box build's latency against the
#           specialised build's per binding, the cold first result on an empty
#           cache; Markdown tables in shapes.md for bench/RESULTS.md
#           (SHAPES_TARGET, default sm90; SHAPES_ARGS, e.g. "--only llama")
#
# Every GPU process runs under `timeout` (a broken mbarrier protocol hangs
# rather than fails).  Logs go to $OUT (the device tool's) or ./gpu-logs:
# env.txt, build.log, gputests.log, models.log, gemm.log, sweep.log,
# splitk.log, plans.log, winograd.log, tune.log, tune.csv, graphs.log, shapes.log,
# shapes.md, e2e.log.  Where the Debian packages cannot be
# installed (the device tool's machine has no apt access), run
# scripts/fetch-device-debs.sh on a machine that can and bring .debs/ along:
# they are unpacked under /tmp/harp-deps and used from there (HARP_USE_DEBS=1:
# even where pkg-config finds the system's).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-$root/gpu-logs}
mkdir -p "$out"
steps=${*:-build gputests models gemm gemm32 plans winograd tune graphs shapes}
jobs=${JOBS:-16}

if [ -d .debs ] && { [ -n "${HARP_USE_DEBS:-}" ] || ! pkg-config --exists isl jansson cmocka libprotobuf-c 2>/dev/null; }; then
  deps=/tmp/harp-deps
  mkdir -p "$deps"
  for f in .debs/*.deb; do dpkg -x "$f" "$deps" || exit 1; done
  lib=$deps/usr/lib/x86_64-linux-gnu
  for pc in "$lib"/pkgconfig/*.pc; do # the .pc files say prefix=/usr
    sed -i "s|^prefix=/usr\$|prefix=$deps/usr|; s|^libdir=/usr|libdir=$deps/usr|; s|^includedir=/usr|includedir=$deps/usr|" "$pc"
  done
  export PKG_CONFIG_PATH=$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  command -v pkg-config >/dev/null || export PKG_CONFIG=$deps/usr/bin/pkgconf
  export PATH=$PATH:$deps/usr/bin # protoc-c
  export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LIBRARY_PATH=$lib${LIBRARY_PATH:+:$LIBRARY_PATH}
  export CPATH=$deps/usr/include${CPATH:+:$CPATH}
fi
# cuBLAS for the GEMM comparison: the toolkit's, else a pip wheel's
if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so'; then
  d=$(find / -xdev -name 'libcublas.so.1[0-9]*' -printf '%h\n' 2>/dev/null | head -1)
  [ -n "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

{
  date -u
  nvidia-smi 2>&1 | head -20
  nvcc --version 2>&1 | tail -2
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  git log --oneline -1 2>/dev/null
} >"$out/env.txt"

rc=0
for s in $steps; do
  echo "== $s ($(date -u +%T))"
  case $s in
  build)
    # shellcheck disable=SC2086
    { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j"$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS}; } >"$out/build.log" 2>&1 ||
      { echo "build failed: see build.log"; tail -30 "$out/build.log"; exit 1; }
    ;;
  tests | gputests)
    sel=; [ "$s" = gputests ] && sel="-R ${GPU_TESTS:-cuda|gpu|bench_cli}"
    # shellcheck disable=SC2086
    (cd build-gpu && ctest -j8 $sel --output-on-failure --timeout 240) >"$out/$s.log" 2>&1 || rc=1
    grep -E "tests passed|Skipped|Failed|\*\*\*|Timeout" "$out/$s.log" | tail -25
    ;;
  models)
    : >"$out/models.log"
    nsan=0
    for m in gemm_tail gemm_bias_relu gemm_1024 conv3x3_s1 conv3x3_s2 attention attention_causal layernorm softmax \
      ewise_bias_gelu reduce_sum_rows gemm_tf32 gemm_tf32_tn gemm_fp32 gemm_fp16r conv3x3_tf32 attention_tf32; do
      if HARP_GPU_MODEL=$m timeout 60 build-gpu/tests/test_cuda_gpu >>"$out/models.log" 2>&1; then
        echo "$m: ok"
      else
        rc=1
        echo "$m: FAILED"
        nsan=$((nsan + 1))
        [ $nsan -le 2 ] && { echo "== compute-sanitizer: $m"; HARP_GPU_MODEL=$m timeout 90 compute-sanitizer --tool memcheck \
          --print-limit 20 build-gpu/tests/test_cuda_gpu 2>&1 | head -80; } >>"$out/models.log"
      fi
    done
    grep -E "\[sm[89]0\]|element|off \(|error|Error" "$out/models.log" | head -60
    ;;
  gemm)
    make -C bench BUILD="$root/build-gpu" "$root/build-gpu/cuda_gemm" >"$out/gemm.log" 2>&1 || { rc=1; tail "$out/gemm.log"; }
    for dt in fp16 bf16; do
      for n in ${GEMM_N:-4096 8192}; do
        for a in ${GEMM_ARCHS:-sm80 sm90}; do
          timeout 60 build-gpu/cuda_gemm $dt $n $a >>"$out/gemm.log" 2>&1 || { rc=1; echo "cuda_gemm $dt $n $a: exit $?" >>"$out/gemm.log"; }
        done
      done
    done
    grep -v "^#" "$out/gemm.log" | tail -20
    ;;
  gemm32)
    [ -x build-gpu/cuda_gemm ] || make -C bench BUILD="$root/build-gpu" "$root/build-gpu/cuda_gemm" >/dev/null 2>&1
    : >"$out/gemm32.log"
    for n in ${GEMM32_N:-4096 8192}; do
      for lay in nn tn; do
        for dt in tf32 fp32; do
          timeout 90 build-gpu/cuda_gemm $dt "$n" $lay >>"$out/gemm32.log" 2>&1 || { rc=1; echo "cuda_gemm $dt $n $lay: exit $?" >>"$out/gemm32.log"; }
        done
      done
      timeout 60 build-gpu/cuda_gemm fp32 "$n" sm80 occ=1 >>"$out/gemm32.log" 2>&1 # SIMT at one CTA per SM (183+ registers)
    done
    grep -v "^#" "$out/gemm32.log"
    ;;
  attn)
    # shellcheck disable=SC2086
    timeout 400 python3 bench/cuda_attn.py --harp build-gpu/harp ${ATTN_ARGS:-} >"$out/attn.log" 2>&1 || rc=1
    cat "$out/attn.log"
    ;;
  sanitize)
    : >"$out/sanitize.log"
    for m in ${SANITIZE_MODELS:-gemm_tf32 gemm_tf32_tn gemm_fp32 gemm_fp16r conv3x3_tf32 attention_tf32}; do
      HARP_GPU_MODEL=$m timeout 120 compute-sanitizer --tool memcheck --print-limit 20 build-gpu/tests/test_cuda_gpu \
        >>"$out/sanitize.log" 2>&1 || rc=1
      echo "$m: $(grep -E "ERROR SUMMARY" "$out/sanitize.log" | tail -1)"
    done
    # whole models through the runtime: fp32 weights packed K-major once for
    # wgmma .tf32 (gemm_chain4, sm90), an fp32 input B packed every run
    # (fp32_matmul_nmajor), the online-softmax attention (a --plan list)
    d=$(mktemp -d)
    printf 'graph main(q: f16[1, 4, 1024, 64], k: f16[1, 4, 1024, 64], v: f16[1, 4, 1024, 64]) -> (o: f16[1, 4, 1024, 64]) {\n    o = attention(q, k, v, causal=true)\n    return o\n}\n' >"$d/attn.harp"
    build-gpu/harp dump "$d/attn.harp" --dump plan --target sm90 --dump-dir "$d" >/dev/null 2>&1 &&
      sed -i 's/streaming_softmax_2pass/online_softmax/' "$d/plan.json"
    for r in "tests/models/gemm_chain4.json --sym M=128 --sym D=128" "tests/models/gpu/fp32_matmul_nmajor.harp" \
      "$d/attn.harp --plan $d/plan.json"; do
      # shellcheck disable=SC2086
      timeout 120 compute-sanitizer --tool memcheck --print-limit 20 build-gpu/harp run $r --backend cuda --target sm90 \
        --random-inputs --out "$d/o" >>"$out/sanitize.log" 2>&1 || rc=1
      echo "harp run ${r%% *} (sm90): $(grep -E "ERROR SUMMARY" "$out/sanitize.log" | tail -1)"
    done
    ;;
  sweep32)
    [ -x build-gpu/cuda_gemm ] || make -C bench BUILD="$root/build-gpu" "$root/build-gpu/cuda_gemm" >/dev/null 2>&1
    : >"$out/sweep32.log"
    n=${SWEEP_N:-4096}
    for t in "" "wm=64 wn=32" "wm=32 wn=64" "bk=16" "bk=16 wm=64 wn=32" "bn=256" "stages=4 wm=64 wn=32" "bk=16 stages=4 wm=64 wn=32"; do
      for lay in nn tn; do
        # shellcheck disable=SC2086
        timeout 45 build-gpu/cuda_gemm tf32 "$n" sm80 $lay $t 2>&1 | grep -v "^#" >>"$out/sweep32.log"
      done
    done
    for t in "" "bn=128" "bn=256 stages=3"; do
      # shellcheck disable=SC2086
      timeout 45 build-gpu/cuda_gemm tf32 "$n" 8192 sm90 tn $t 2>&1 | grep -v "^#" >>"$out/sweep32.log"
    done
    for t in "" "bk=8" "bk=32" "stages=4"; do
      # shellcheck disable=SC2086
      timeout 45 build-gpu/cuda_gemm fp32 "$n" sm80 nn $t 2>&1 | grep -v "^#" >>"$out/sweep32.log"
    done
    cat "$out/sweep32.log"
    ;;
  sweep)
    [ -x build-gpu/cuda_gemm ] || make -C bench BUILD="$root/build-gpu" "$root/build-gpu/cuda_gemm" >/dev/null 2>&1
    : >"$out/sweep.log"
    for dt in fp16 bf16; do
      for t in "bn=128 stages=3" "bn=128 stages=4" "bn=256 stages=2" "bn=256 stages=3" "bn=256 stages=3 group=16"; do
        # shellcheck disable=SC2086
        timeout 45 build-gpu/cuda_gemm $dt "${SWEEP_N:-8192}" sm90 $t 2>&1 | grep -v "^#" >>"$out/sweep.log"
      done
    done
    cat "$out/sweep.log"
    ;;
  shapes)
    # shellcheck disable=SC2086
    timeout "${SHAPES_TIMEOUT:-480}" python3 bench/cuda_shapeset.py --harp build-gpu/harp --target "${SHAPES_TARGET:-sm90}" \
      --out "$out/shapes.md" ${SHAPES_ARGS:-} >"$out/shapes.log" 2>&1 || rc=1
    if [ -s "$out/shapes.md" ]; then cat "$out/shapes.md"; else tail -20 "$out/shapes.log"; fi
    grep -q "FAILED" "$out/shapes.md" 2>/dev/null && rc=1
    ;;
  e2e)
    # shellcheck disable=SC2086
    timeout "${E2E_TIMEOUT:-480}" python3 bench/cuda_e2e.py --harp build-gpu/harp ${E2E_ARGS:-} >"$out/e2e.log" 2>&1 || rc=1
    cat "$out/e2e.log"
    ;;
  splitk)
    timeout 400 python3 bench/cuda_splitk.py --harp build-gpu/harp --target "${SPLITK_TARGET:-sm90}" >"$out/splitk.log" 2>&1 || rc=1
    cat "$out/splitk.log"
    ;;
  plans)
    (cd build-gpu && ctest -R 'cuda_plan_fields|plan_search' --output-on-failure --timeout 240) >"$out/plans.log" 2>&1 || rc=1
    timeout 900 python3 bench/cuda_plans.py --harp build-gpu/harp --target "${PLANS_TARGET:-sm90}" >>"$out/plans.log" 2>&1 || rc=1
    grep -E "tests passed|Failed|cuda_plans|ms|WRONG|ERROR" "$out/plans.log" | tail -40
    ;;
  winograd)
    (cd build-gpu && ctest -R 'cuda_winograd' --output-on-failure --timeout 240) >"$out/winograd.log" 2>&1 || rc=1
    # shellcheck disable=SC2086
    timeout 900 python3 bench/cuda_winograd.py --harp build-gpu/harp --target "${WINO_TARGET:-sm90}" ${WINO_ARGS:-} \
      >>"$out/winograd.log" 2>&1 || rc=1
    grep -E "tests passed|Failed|cuda_winograd|ms|error|ERROR" "$out/winograd.log" | tail -40
    ;;
  tune)
    tc=$(mktemp -d); : >"$out/tune.log"
    printf 'graph<N=1, C=256, H=28, W=28, K=256> main(x: f16[N, C, H, W], w: f16[K, C, 3, 3]) -> (y: f16[N, K, H, W]) {\n    y = conv2d(x, w, pad=[1, 1])\n    return y\n}\n' >"$tc/conv.harp"
    for args in "bench/models/gemm16.json --sym M=4096 --sym K=4096 --sym N=4096" \
      "bench/models/gemm16.json --sym M=64 --sym K=8192 --sym N=1024" "$tc/conv.harp"; do
      # shellcheck disable=SC2086
      HARP_CACHE_DIR=$tc timeout 600 build-gpu/harp tune $args --backend cuda --log "$out/tune.csv" >>"$out/tune.log" 2>&1 || rc=1
      # shellcheck disable=SC2086
      HARP_CACHE_DIR=$tc timeout 120 build-gpu/harp run $args --backend cuda --random-inputs --dump plan \
        --dump-dir "$tc/d" --out "$tc/o" >/dev/null 2>>"$out/tune.log" &&
        { grep -q '"source": *"cache"' "$tc/d/plan.json" && echo "cached plan read back: $args" ||
          { echo "NOT read back from the plan cache: $args"; rc=1; }; } >>"$out/tune.log"
    done
    grep -E "^harp tune|region|default|Spearman|cached|read back|error" "$out/tune.log"
    rm -rf "$tc"
    ;;
  graphs)
    timeout 300 make -C bench BUILD="$root/build-gpu" cuda-graphs >"$out/graphs.log" 2>&1 || rc=1
    tail -20 "$out/graphs.log"
    ;;
  *) echo "gpu_acceptance: unknown step '$s' (build gputests models tests gemm gemm32 sweep splitk plans winograd tune graphs shapes attn sanitize e2e)" >&2; exit 2 ;;
  esac
done
exit $rc
