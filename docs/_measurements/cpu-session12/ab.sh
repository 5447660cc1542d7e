#!/bin/bash
# interleaved A/B of the CPU LU: old tree (0c99c48) vs new (working tree), 2 ranks x 1 thread, n=4096
source /work/venv/bin/activate
cd /tmp
for i in 7 8 9; do
  for v in old new; do
    if [ $v = old ]; then pp=/tmp/oldroot; else pp=/work/main; fi
    PYTHONPATH=$pp BLASMP_BACKEND=cpu OMP_NUM_THREADS=1 timeout 600 mpiexec -n 2 python -m blasmp_array.bench lu --n 4096 --grid 1x2 --block 256 --repeat 3 --warmup 1 --compare --baselines numpy --compare-threads 2 --json /tmp/cpu_lu_${v}_$i.json > /tmp/cpu_lu_${v}_$i.log 2>&1
    echo "$v $i rc=$?"
  done
done
