#!/usr/bin/env bash
# Names the kind of machine a benchmark ran on (BENCHMARKS.md quotes it):
# what one fork+exit+wait of a warm python costs, and the page faults of
# 200 of them. On a VM whose hypervisor traps page-table updates a cycle
# costs 12-16 ms; elsewhere ~2 ms.
set -euo pipefail
py=$(python3 -c 'import sys; print(sys.executable)')
prog='import os, time
n = 200
t = time.perf_counter()
for _ in range(n):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print("python fork+exit+wait: %.2f ms" % ((time.perf_counter() - t) * 1000 / n))'
"$py" -c "$prog"
if command -v perf >/dev/null; then
  perf stat -e page-faults -x, "$py" -c "$prog" 2>&1 >/dev/null | awk -F, '/page-faults/ {printf "page faults, 200 cycles: %s\n", $1}'
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
