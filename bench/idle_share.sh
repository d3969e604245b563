# Sourced by the benchmark scripts: how much of the machine nobody else used, recorded beside every
# number (the benchmarks share 2 cores with whatever runs). From /proc/stat: idle + iowait over all states.
#   cpu_sample                  prints "IDLE TOTAL" (jiffies since boot)
#   idle_share "$A" "$B"        the idle percent between two cpu_sample outputs
#   print_idle_share_before     samples over one second and prints the line the READMEs record

cpu_sample() { awk '/^cpu /{ t = 0; for (i = 2; i <= NF; i++) t += $i; print $5 + $6, t }' /proc/stat; }

idle_share() {
  local idle0 total0 idle1 total1
  read -r idle0 total0 <<< "$1"
  read -r idle1 total1 <<< "$2"
  awk -v i=$((idle1 - idle0)) -v t=$((total1 - total0)) 'BEGIN { printf "%.0f", (t > 0 ? 100 * i / t : 0) }'
}

print_idle_share_before() {
  local before
  before="$(cpu_sample)"
  sleep 1
  echo "idle CPU share over 1 s before the runs: $(idle_share "$before" "$(cpu_sample)")% of $(nproc) cores"
}
