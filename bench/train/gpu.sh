#!/usr/bin/env bash
# bench/train/gpu.sh: dedloc on one CUDA GPU, end to end, in one short run (about 6 minutes, build included):
# dedloc's training step against PyTorch's, a collaboration of GPU peers, and CPU and GPU peers handing the
# training state to each other. Written for a bare GPU machine with no package registry and no internet
# (Ubuntu 24.04, CMake, g++, nvcc, ninja, PyTorch with CUDA under python3; /work/shared/GPU.md): what the
# build and the runs need travels in .gpu/ (git ignores it; carry it with the working tree):
#   .gpu/debs/           Debian packages (libzmq, cppzmq, msgpack, lpsolve, libsodium, SentencePiece, ...),
#                        unpacked with `dpkg -x` into .gpu/prefix (never into /)
#   .gpu/fallback-debs/  unpacked into .gpu/fallback only for what the machine lacks: pkg-config, zlib's
#                        headers, yaml-cpp, CLI11, libzmq's runtime dependencies (krb5, libbsd)
#   .gpu/data/fortunes/  the corpus of recipes/albert-tiny.yaml (Debian's `fortunes`), and .gpu/data/cache/ its
#                        token file and SentencePiece model, copied into every peer's work directory
# Stages, each timed and under `timeout`; one that fails does not stop the next:
#   a. build   configure BUILD_DIR (Release, Ninja, the libtorch inside PyTorch), build dedloc-train,
#              dedloc-dht, dedloc-tokenize and bench_albert_speed
#   b. speed   bench_albert_speed against pytorch_mlm.py on DEVICE, ALBERT-base's shape (12 layers, H768,
#              E128, 12 heads, 3072, vocab 30000, seq 128, batch 32), per precision (fp32, bf16), PAIRS pairs
#              alternating which side goes first: medians of samples/s and dedloc / PyTorch
#   c. collab  a DHT node and two dedloc-train peers on DEVICE, recipes/albert-tiny.yaml (the corpus from
#              .gpu/data) for COLLAB_SECONDS: first and last steps' losses, steps averaged
#   d. join    during (c) a --device cpu peer joins and downloads the state from a GPU peer; once the GPU
#              peers have left, a new GPU peer joins and downloads the state from the CPU peer
#   e. OUT/gpu.log (everything, with set -x) and OUT/summary.txt (the key numbers, also printed at the end)
# The stages shrink or skip to end within BUDGET_S seconds.
#
#   bash bench/train/gpu.sh              (from anywhere: it works in the repository root)
#   bash bench/train/gpu.sh --populate   (on Debian 12, with a build in BUILD_DIR, default build: refills .gpu/
#                                         from apt-get download, the fortunes package and a tokenizing run)
# Environment: OUT (out/gpu), BUILD_DIR (build-cuda), SKIP_BUILD=1 (use BUILD_DIR as built), DEVICE (cuda;
# cpu tests the script anywhere), PYTHON (python3), STAGES ("build speed collab"), BUDGET_S (440),
# PAIRS (3), STEPS (20), WARMUP (3), BATCH (32), SHAPE (albert-base, or tiny: the scripts' default shape),
# PRECISIONS ("fp32 bf16" on cuda, fp32 on cpu), SPEED_THREADS (4), COLLAB_SECONDS (60), JOIN_AFTER (15),
# REJOIN_SECONDS (25), PEER_THREADS (4), CPU_THREADS (8), JOBS (nproc), BUILD_TARGETS (the four above),
# FORCE_FALLBACKS=1 (a test of this script: use every fallback package, as if the machine lacked them).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD

# Debian packages for .gpu/debs (cmake/Dependencies.cmake: all of them are needed to configure, even those
# only dedloc-avg links) and, for .gpu/fallback-debs, what an Ubuntu machine may lack.
core_debs="libzmq5 libzmq3-dev cppzmq-dev libmsgpack-cxx-dev liblpsolve55-dev libsodium23 libsodium-dev libpgm-5.3-0
  libnorm1 libcolamd2 libsuitesparseconfig5 libsentencepiece-dev libsentencepiece0 libprotobuf-lite32
  nlohmann-json3-dev libcpp-httplib-dev libcpp-httplib0.11 libjs-chart.js"
fallback_debs="pkgconf-bin libpkgconf3 zlib1g-dev libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev libgssapi-krb5-2
  libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1 libbsd0 libmd0"
if [ "${1-}" = --populate ]; then
  set -ex
  rm -rf .gpu/debs .gpu/fallback-debs .gpu/data .gpu/prefix .gpu/fallback
  mkdir -p .gpu/debs .gpu/fallback-debs .gpu/data/fortunes .gpu/data/cache
  # shellcheck disable=SC2086
  (cd .gpu/debs && apt-get download $core_debs)
  # shellcheck disable=SC2086
  (cd .gpu/fallback-debs && apt-get download $fallback_debs)
  # What the text corpus reads of the fortunes directory (text_corpus.hpp): its regular files, no indexes.
  find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' ! -name '.*' \
    -exec cp {} .gpu/data/fortunes/ \;
  # The token cache: a one-peer run of the recipe tokenizes the corpus into its work directory.
  work=$(mktemp -d)
  sed "/^data:/a\\  paths: [$root/.gpu/data/fortunes]" recipes/albert-tiny.yaml > "$work/recipe.yaml"
  timeout 300 "${BUILD_DIR:-build}/tools/dedloc-train/dedloc-train" --recipe "$work/recipe.yaml" --min-peers 1 \
    --max-time 1 --device cpu --checkpoint-dir "$work" --listen tcp://127.0.0.1:0 --avg-listen tcp://127.0.0.1:0 \
    > /dev/null || true
  cp "$work"/albert-spm-*.model "$work"/albert-tokens-*.bin .gpu/data/cache/
  rm -rf "$work"
  du -sh .gpu/*
  exit 0
fi
out=${OUT:-$root/out/gpu}
mkdir -p "$out"
log=$out/gpu.log
summary=$out/summary.txt
: > "$log"
: > "$summary"
exec 3>&1                # the caller's stdout: progress lines and the summary
exec >> "$log" 2>&1      # everything else, traced
export PS4='+ [${SECONDS}s] '
set -x
# Nothing started here outlives the script (each process also runs under its own timeout).
trap 'kill -TERM $(jobs -p) 2>/dev/null' EXIT

budget=${BUDGET_S:-440}
build=${BUILD_DIR:-build-cuda}
case "$build" in /*) ;; *) build=$root/$build ;; esac
device=${DEVICE:-cuda}
python=${PYTHON:-python3}
stages=${STAGES:-build speed collab}
jobs=${JOBS:-$(nproc)}
if [ "${device%%:*}" = cuda ]; then precisions=${PRECISIONS:-fp32 bf16}; else precisions=${PRECISIONS:-fp32}; fi
collab_seconds=${COLLAB_SECONDS:-60}
join_after=${JOIN_AFTER:-15}
rejoin_seconds=${REJOIN_SECONDS:-25}
P=$root/.gpu/prefix      # the packages of .gpu/debs
F=$root/.gpu/fallback    # the packages of .gpu/fallback-debs the machine lacks
runs=$root/runs/gpu
orig_ld=${LD_LIBRARY_PATH-}

left() { echo $((budget - SECONDS)); }
note() { echo "$*"; echo "$*" >&3; }
sum() { echo "$*" >> "$summary"; }
declare -A status took
stage() {  # stage NAME FUNCTION: runs it, records status and seconds
  local name=$1 t0=$SECONDS rc
  note "=== stage $name: start at ${SECONDS}s ($(left)s of the budget left)"
  "$2"
  rc=$?
  took[$name]=$((SECONDS - t0))
  if [ "$rc" = 0 ]; then status[$name]=ok; else status[$name]="FAILED (rc $rc)"; fi
  note "=== stage $name: ${status[$name]} in ${took[$name]}s"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { sed -nE "s/.*\"$1\": *\"?([-0-9.e+a-z:]+)\"?.*/\\1/p"; }

# --- the machine ------------------------------------------------------------------------------------------
machine() {
  uname -a
  cat /etc/os-release 2>/dev/null | head -2
  echo "$(nproc) cores; $(free -g 2>/dev/null | awk '/Mem:/ { print $2 " GiB" }') memory"
  nvidia-smi 2>&1 | head -20 || true
  command -v cmake ninja g++ nvcc pkg-config pkgconf dpkg "$python" || true
  cmake --version 2>&1 | head -1
  timeout 120 "$python" -c 'import torch, sys
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-", "cxx11abi", torch.compiled_with_cxx11_abi())' || true
}

# --- .gpu/debs into .gpu/prefix, and what the machine lacks from .gpu/fallback-debs into .gpu/fallback ---
sonames=""
have_soname() {  # in the loader's cache or a system library directory (no grep -q in a pipe: pipefail)
  local -
  set +x
  [ -n "$sonames" ] || sonames=$(ldconfig -p 2>/dev/null | awk '{ print $1 }')
  grep -qxF "$1" <<< "$sonames" && return 0
  local d
  for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 /usr/local/lib; do
    [ -e "$d/$1" ] && return 0
  done
  return 1
}
have_cmake_package() {  # what find_package(NAME) would find in the system prefixes
  local - d
  set +x
  for d in /usr /usr/local; do
    compgen -G "$d/lib/x86_64-linux-gnu/cmake/$1*" > /dev/null && return 0
    compgen -G "$d/lib/cmake/$1*" > /dev/null && return 0
    compgen -G "$d/lib64/cmake/$1*" > /dev/null && return 0
    compgen -G "$d/share/cmake/$1*" > /dev/null && return 0
  done
  return 1
}
fallbacks_used=""
unpack_fallback() {  # unpack_fallback DEBNAME...
  local name f
  for name in "$@"; do
    f=$(compgen -G "$root/.gpu/fallback-debs/${name}_*.deb" | head -1)
    if [ -z "$f" ]; then echo "prepare: no fallback package $name in .gpu/fallback-debs"; continue; fi
    dpkg -x "$f" "$F" && fallbacks_used="$fallbacks_used $name"
  done
}
pkg_config=""
prepare() {
  rm -rf "$P" "$F"
  mkdir -p "$P" "$F"
  local f ok=0
  for f in "$root"/.gpu/debs/*.deb; do dpkg -x "$f" "$P" || { echo "prepare: dpkg -x $f failed"; ok=1; }; done
  # libzmq's, libkrb5's and libbsd's runtime dependencies: only those the machine lacks (no shadowing).
  local pair
  for pair in libbsd.so.0:libbsd0 libmd.so.0:libmd0 libgssapi_krb5.so.2:libgssapi-krb5-2 libkrb5.so.3:libkrb5-3 \
              libk5crypto.so.3:libk5crypto3 libkrb5support.so.0:libkrb5support0 libcom_err.so.2:libcom-err2 \
              libkeyutils.so.1:libkeyutils1; do
    have_soname "${pair%%:*}" || unpack_fallback "${pair#*:}"
  done
  if [ "${FORCE_FALLBACKS:-0}" = 1 ]; then  # a test of this script: as if the machine lacked all of them
    unpack_fallback libbsd0 libmd0 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 \
      libkeyutils1 pkgconf-bin libpkgconf3 libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev
    unpack_fallback_zlib
    pkg_config=$F/usr/bin/pkgconf
  elif command -v pkg-config > /dev/null; then
    pkg_config=$(command -v pkg-config)
  elif command -v pkgconf > /dev/null; then
    pkg_config=$(command -v pkgconf)
  else
    unpack_fallback pkgconf-bin
    have_soname libpkgconf.so.3 || unpack_fallback libpkgconf3
    pkg_config=$F/usr/bin/pkgconf
  fi
  if [ "${FORCE_FALLBACKS:-0}" != 1 ]; then
    have_cmake_package yaml-cpp || unpack_fallback libyaml-cpp-dev libyaml-cpp0.7
    have_cmake_package CLI11 || [ -e /usr/include/CLI/CLI.hpp ] || unpack_fallback libcli11-dev
    if [ ! -e /usr/include/zlib.h ] && [ ! -e /usr/local/include/zlib.h ]; then unpack_fallback_zlib; fi
  fi
  fix_prefixes
  echo "prepare: fallbacks unpacked:${fallbacks_used:- none}"
  return $ok
}
unpack_fallback_zlib() {  # the headers, and libz.so pointing at the machine's own libz.so.1
  unpack_fallback zlib1g-dev
  local system_libz
  system_libz=$(ldconfig -p 2>/dev/null | awk '$1 == "libz.so.1" { print $NF; exit }')
  [ -n "$system_libz" ] && ln -sfn "$system_libz" "$F/usr/lib/x86_64-linux-gnu/libz.so"
}
fix_prefixes() {
  local - root_dir pc lib base
  set +x
  for root_dir in "$P" "$F"; do
    # pkg-config files: their /usr is the unpacked prefix; Requires.private (for static linking) named
    # packages the machine may lack (openssl, brotli, krb5-gssapi ...), which fails even --exists.
    while IFS= read -r pc; do
      grep -qF "$root_dir/usr" "$pc" && continue  # done already (a retry)
      sed -i -E "/^Requires\.private:/d; s#(^|[=\" ]|-I|-L)/usr([/\" ]|\$)#\\1$root_dir/usr\\2#g" "$pc"
    done < <(find "$root_dir" -name '*.pc')
    # Runtime packages ship libNAME.so.N only; find_library (libcolamd, ...) looks for libNAME.so.
    while IFS= read -r lib; do
      base=${lib%%.so.*}.so
      [ -e "$base" ] || [ -L "$base" ] || ln -s "$(basename "$lib")" "$base"
    done < <(find "$root_dir" -name 'lib*.so.[0-9]*' \( -type f -o -type l \))
  done
}
environment() {
  local dirs="$P/usr/lib/x86_64-linux-gnu:$P/usr/lib:$F/usr/lib/x86_64-linux-gnu:$F/lib/x86_64-linux-gnu"
  export LD_LIBRARY_PATH="$dirs${orig_ld:+:$orig_ld}"
  export PKG_CONFIG_PATH="$P/usr/lib/x86_64-linux-gnu/pkgconfig:$P/usr/share/pkgconfig:$F/usr/lib/x86_64-linux-gnu/pkgconfig:$F/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  if ! command -v nvcc > /dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=$PATH:/usr/local/cuda/bin; fi
}

# --- a. build -----------------------------------------------------------------------------------------------
configure() {
  local torch_prefix
  torch_prefix=$(LD_LIBRARY_PATH=$orig_ld timeout 120 "$python" -c 'import torch; print(torch.utils.cmake_prefix_path)') || return 1
  local args=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEDLOC_TESTS=OFF -DDEDLOC_BENCH=ON
              -DDEDLOC_TORCH=ON "-DCMAKE_PREFIX_PATH=$torch_prefix;$P/usr;$F/usr"
              "-DDEDLOC_CHART_JS=$P/usr/share/javascript/chart.js/chart.min.js" -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
  [ -n "$pkg_config" ] && args+=("-DPKG_CONFIG_EXECUTABLE=$pkg_config")
  timeout 240 cmake "${args[@]}"
}
build_stage() {
  local t0=$SECONDS
  if ! configure; then
    echo "build: retrying with every fallback package (yaml-cpp, CLI11, zlib, pkgconf)"
    rm -f "$build/CMakeCache.txt"
    unpack_fallback libyaml-cpp-dev libyaml-cpp0.7 libcli11-dev
    [ -e /usr/include/zlib.h ] || unpack_fallback_zlib
    if [ -z "$pkg_config" ] || [ ! -x "$pkg_config" ]; then unpack_fallback pkgconf-bin libpkgconf3; pkg_config=$F/usr/bin/pkgconf; fi
    fix_prefixes
    configure || return 1
  fi
  sum "build: configure $((SECONDS - t0))s"
  local t1=$SECONDS limit=$(( $(left) - 150 ))
  [ "$limit" -gt 420 ] && limit=420
  [ "$limit" -lt 60 ] && limit=60
  # -k 0: a target that fails to compile leaves the others to build (the collaboration needs no benchmark).
  # shellcheck disable=SC2086
  timeout "$limit" ninja -C "$build" -k 0 -j "$jobs" ${BUILD_TARGETS:-dedloc-train dedloc-dht dedloc-tokenize bench_albert_speed}
  local rc=$?
  sum "build: ninja ${limit}s limit, rc $rc, $((SECONDS - t1))s"
  local t
  for t in tools/dedloc-train/dedloc-train tools/dedloc-dht/dedloc-dht tools/dedloc-tokenize/dedloc-tokenize \
           bench/train/bench_albert_speed; do
    if [ -x "$build/$t" ]; then sum "build: built $t"; else sum "build: MISSING $t"; fi
  done
  return $rc
}

# --- b. speed -----------------------------------------------------------------------------------------------
speed_stage() {
  local bin=$build/bench/train/bench_albert_speed results=$runs/speed.jsonl
  local batch=${BATCH:-32} pairs=${PAIRS:-3} steps=${STEPS:-20} warmup=${WARMUP:-3} threads=${SPEED_THREADS:-4}
  local shape=(--layers 12 --hidden 768 --embedding 128 --heads 12 --intermediate 3072 --vocab 30000 --seq 128)
  [ "${SHAPE:-albert-base}" = tiny ] && shape=()
  local common=("${shape[@]}" --batch "$batch" --warmup "$warmup" --steps "$steps" --threads "$threads" --device "$device")
  # What the collaboration stage needs (its own shrinking aside), kept back from this one.
  local reserve=$((collab_seconds + 75))
  mkdir -p "$runs"
  : > "$results"
  [ -x "$bin" ] || echo "speed: $bin is not built: PyTorch only"
  local precision i side order rc=0
  # Pair by pair, each precision in turn: a budget cut leaves every precision with its first pairs.
  for i in $(seq "$pairs"); do
    if [ $((i % 2)) = 1 ]; then order="dedloc pytorch"; else order="pytorch dedloc"; fi
    for precision in $precisions; do
      for side in $order; do
        if [ "$(left)" -lt "$reserve" ]; then
          note "speed: $(left)s left, $reserve kept for the collaboration: no more speed runs"
          sum "speed: cut short by the time budget after $((i - 1)) full pairs"
          break 3
        fi
        if [ "$side" = dedloc ]; then
          [ -x "$bin" ] || continue
          timeout -k 5 120 "$bin" --precision "$precision" "${common[@]}" | tee -a "$results" || rc=1
        else
          LD_LIBRARY_PATH=$orig_ld timeout -k 5 120 "$python" bench/train/pytorch_mlm.py --precision "$precision" \
            "${common[@]}" | tee -a "$results" || rc=1
        fi
      done
    done
    note "speed: pair $i done at ${SECONDS}s"
  done
  set +x
  for precision in $precisions; do
    local d p n_d n_p
    d=$(grep '"impl": *"dedloc"' "$results" | grep "\"precision\": *\"$precision\"" | field samples_per_s | median)
    p=$(grep '"impl": *"pytorch"' "$results" | grep "\"precision\": *\"$precision\"" | field samples_per_s | median)
    n_d=$(grep '"impl": *"dedloc"' "$results" | grep -c "\"precision\": *\"$precision\"")
    n_p=$(grep '"impl": *"pytorch"' "$results" | grep -c "\"precision\": *\"$precision\"")
    local ds ps
    ds=$(grep '"impl": *"dedloc"' "$results" | grep "\"precision\": *\"$precision\"" | field median_step_s | median)
    ps=$(grep '"impl": *"pytorch"' "$results" | grep "\"precision\": *\"$precision\"" | field median_step_s | median)
    sum "speed $device $precision ${SHAPE:-albert-base} batch $batch: dedloc $d samples/s (step ${ds}s, $n_d runs), PyTorch $p samples/s (step ${ps}s, $n_p runs): dedloc/PyTorch $(awk -v d="$d" -v p="$p" 'BEGIN { if (d + 0 > 0 && p + 0 > 0) printf "%.2fx", d / p; else print "n/a" }')"
  done
  set -x
  echo "speed: every run's line:"
  cat "$results"
  [ -s "$results" ] || return 1
  return $rc
}

# --- c. and d. collaboration, and the state crossing between CPU and GPU peers --------------------------
await_ready() {  # await_ready FILE SECONDS: prints the first endpoint of the ready line
  local - i
  set +x
  for i in $(seq $(($2 * 10))); do
    if grep -q '"ready":true' "$1" 2>/dev/null; then
      grep -m1 '"ready":true' "$1" | sed -nE 's/.*"endpoints":\["([^"]*)".*/\1/p'
      return 0
    fi
    sleep 0.1
  done
  return 1
}
await_exit() {  # await_exit DEADLINE_SECONDS PID...: then TERM, then KILL what is left
  local - deadline=$1 p
  set +x
  shift
  for p in "$@"; do while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.5; done; done
  for p in "$@"; do kill -0 "$p" 2>/dev/null && { echo "await_exit: $p still running at ${SECONDS}s: SIGTERM"; kill -TERM "$p"; }; done
  for p in "$@"; do local i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.5; i=$((i + 1)); done; done
  for p in "$@"; do kill -0 "$p" 2>/dev/null && { echo "await_exit: $p still running: SIGKILL"; kill -KILL "$p"; }; done
  for p in "$@"; do wait "$p" 2>/dev/null; echo "await_exit: $p exited with $?"; done
}
declare -A peer_pid peer_key
start_peer() {  # start_peer NAME DEVICE MAX_SECONDS THREADS DATA_SEED
  local dir=$runs/$1
  mkdir -p "$dir"
  cp "$root"/.gpu/data/cache/* "$dir"/ 2>/dev/null || true  # the tokenized corpus: no tokenizer training
  timeout -k 10 $(($3 + 120)) "$train" --recipe "$recipe" --initial-peers "$bootstrap" \
    --listen tcp://127.0.0.1:0 --avg-listen tcp://127.0.0.1:0 --min-peers 2 --max-time "$3" --threads "$4" \
    --data-seed "$5" --device "$2" --checkpoint-dir "$dir" --json > "$dir/events.jsonl" 2> "$dir/log" &
  peer_pid[$1]=$!
}
peer_ready() {  # peer_ready NAME SECONDS
  if await_ready "$runs/$1/events.jsonl" "$2" > /dev/null; then
    # Its key, as in the endpoints that donors are named by (tcp://HOST:PORT/k/KEY).
    peer_key[$1]=$(grep -m1 '"ready":true' "$runs/$1/events.jsonl" | sed -nE 's#.*"endpoints":\["[^"]*/k/([0-9a-f]+)".*#\1#p')
    note "collab: $1 ready at ${SECONDS}s (key ${peer_key[$1]:0:12})"
    return 0
  fi
  note "collab: $1 not ready after $2 s; the end of its log:"
  tail -n 20 "$runs/$1/log" | tee /dev/fd/3
  return 1
}
name_of() {  # the peer whose key a donor address carries
  local n
  for n in "${!peer_key[@]}"; do
    [ -n "${peer_key[$n]}" ] && [[ "$1" == *"/k/${peer_key[$n]}"* ]] && { echo "$n"; return; }
  done
  echo "?"
}
report_peer() {  # report_peer NAME: the key lines of a peer's run, into the summary
  local - ev=$runs/$1/events.jsonl
  set +x
  [ -f "$ev" ] || { sum "collab $1: no events"; return; }
  local steps averaged first last exitline
  steps=$(grep -cE '"event":"(averaged|alone|local|skipped)"' "$ev")
  averaged=$(grep -c '"event":"averaged"' "$ev")
  first=$(grep -m1 -E '"event":"(averaged|alone|local)"' "$ev")
  last=$(grep -E '"event":"(averaged|alone|local)"' "$ev" | tail -n 1)
  exitline=$(grep '"event":"exit"' "$ev" | tail -n 1)
  local trend
  trend=$(grep -E '"event":"(averaged|alone|local)"' "$ev" | field loss | awk '
    { v[NR] = $1 }
    END { if (NR < 2) { print "too few steps"; exit }
          n = NR < 10 ? int(NR / 2) : 5; a = 0; b = 0
          for (i = 1; i <= n; ++i) { a += v[i]; b += v[NR - n + i] }
          a /= n; b /= n
          printf "loss %.4f -> %.4f (means of the first and last %d steps, %+.1f%%)", a, b, n, 100 * (b - a) / a }')
  sum "collab $1: $steps steps, $averaged averaged; $trend"
  sum "  first step: $first"
  sum "  last step:  $last"
  sum "  exit:       ${exitline:-none}"
  local line
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    sum "  download:   $line  <- from $(name_of "$(echo "$line" | sed -nE 's/.*"donor":"([^"]*)".*/\1/p')")"
  done < <(grep '"event":"loaded_state"' "$ev")
}
collab_stage() {
  train=$build/tools/dedloc-train/dedloc-train
  local dht=$build/tools/dedloc-dht/dedloc-dht
  [ -x "$train" ] && [ -x "$dht" ] || { note "collab: dedloc-train or dedloc-dht is not built"; return 1; }
  local secs=$collab_seconds avail=$(( $(left) - 60 ))
  if [ "$avail" -lt $((secs + join_after)) ]; then secs=$((avail - join_after)); fi
  if [ "$secs" -lt 30 ]; then note "collab: only $(left)s left: skipped"; sum "collab: skipped (time budget)"; return 1; fi
  [ "$secs" != "$collab_seconds" ] && note "collab: shortened to ${secs}s by the time budget"
  rm -rf "$runs/dht" "$runs"/gpu* "$runs/cpu"*
  mkdir -p "$runs/dht"
  # The recipe as shipped, its corpus the copy in .gpu/data (the machine has no fortunes package).
  recipe=$runs/albert-tiny.yaml
  sed "/^data:/a\\  paths: [$root/.gpu/data/fortunes]" recipes/albert-tiny.yaml > "$recipe"
  cat "$recipe"
  timeout -k 5 $((secs + rejoin_seconds + 240)) "$dht" --log-level warning serve --listen tcp://127.0.0.1:0 \
    > "$runs/dht/ready.json" 2> "$runs/dht/log" &
  local dht_pid=$!
  bootstrap=$(await_ready "$runs/dht/ready.json" 30) || { note "collab: the DHT node did not start"; cat "$runs/dht/log"; kill -TERM $dht_pid; return 1; }
  local t0=$SECONDS rc=0
  start_peer gpu0 "$device" "$secs" "${PEER_THREADS:-4}" 1
  start_peer gpu1 "$device" "$secs" "${PEER_THREADS:-4}" 2
  peer_ready gpu0 120 || rc=1
  peer_ready gpu1 60 || rc=1
  sum "collab: 2 peers on $device for ${secs}s, ready after $((SECONDS - t0))s"
  # d. a CPU peer joins the running swarm: it downloads the state from a GPU peer, then trains with them.
  sleep "$join_after"
  local cpu_secs=$((secs + rejoin_seconds + 60))
  start_peer cpu "cpu" "$cpu_secs" "${CPU_THREADS:-8}" 3
  peer_ready cpu 90 || rc=1
  await_exit $((t0 + secs + 90)) "${peer_pid[gpu0]}" "${peer_pid[gpu1]}"
  note "collab: the GPU peers left at ${SECONDS}s"
  # ... and the reverse: a new GPU peer joins the CPU peer, now alone, and downloads the state from it.
  if kill -0 "${peer_pid[cpu]}" 2>/dev/null && [ "$(left)" -gt $((rejoin_seconds + 45)) ]; then
    sleep 3
    start_peer gpu2 "$device" "$rejoin_seconds" "${PEER_THREADS:-4}" 4
    peer_ready gpu2 90 || rc=1
    await_exit $((SECONDS + rejoin_seconds + 40)) "${peer_pid[gpu2]}"
  else
    note "collab: no rejoin (the CPU peer ended, or $(left)s left)"
    sum "collab: the GPU peer rejoining the CPU peer was skipped"
  fi
  kill -TERM "${peer_pid[cpu]}" 2>/dev/null
  await_exit $((SECONDS + 30)) "${peer_pid[cpu]}"
  kill -TERM "$dht_pid" 2>/dev/null
  await_exit $((SECONDS + 10)) "$dht_pid"
  local n
  for n in gpu0 gpu1 cpu gpu2; do [ -d "$runs/$n" ] && report_peer "$n"; done
  for n in gpu0 gpu1 cpu gpu2; do
    [ -d "$runs/$n" ] || continue
    echo "----- $n: events (steps every 10th, all other lines)"
    awk '/"event":"(averaged|alone|local|skipped)"/ { if (++k % 10 != 1) next } { print }' "$runs/$n/events.jsonl"
    echo "----- $n: log (last 40 lines)"
    tail -n 40 "$runs/$n/log"
  done
  # Both GPU peers must have averaged steps and the CPU peer must have downloaded.
  if [ "$(grep -c '"event":"averaged"' "$runs/gpu0/events.jsonl" 2>/dev/null)" -gt 0 ] 2>/dev/null; then :; else
    sum "collab: gpu0 averaged no step"
    rc=1
  fi
  if ! grep -q '"event":"loaded_state"' "$runs/cpu/events.jsonl" 2>/dev/null; then
    sum "collab: the CPU peer downloaded no state (a peer downloads when the swarm is 2+ epochs ahead of it)"
    rc=1
  fi
  return $rc
}

# --- main ---------------------------------------------------------------------------------------------------
note "gpu.sh: $(date -u +%FT%TZ) in $root, device $device, build $build, stages '$stages', budget ${budget}s; log $log"
sum "gpu.sh $(date -u +%FT%TZ): device $device, commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), budget ${budget}s"
machine
sum "machine: $(nproc) cores; $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)"
stage prepare prepare
environment
for s in $stages; do
  case "$s" in
    build) if [ "${SKIP_BUILD:-0}" = 1 ]; then note "build: skipped (SKIP_BUILD=1), using $build"; else stage build build_stage; fi ;;
    speed) stage speed speed_stage ;;
    collab) stage collab collab_stage ;;
    *) note "unknown stage '$s'" ;;
  esac
done
set +x
{
  echo "stages:"
  for s in prepare $stages; do [ -n "${status[$s]-}" ] && echo "  $s: ${status[$s]} in ${took[$s]}s"; done
  echo "total: ${SECONDS}s"
} >> "$summary"
echo "===== summary ($summary)"
cat "$summary"
echo "===== summary" >&3
cat "$summary" >&3
