#!/bin/bash
# Session 26: the SASS of the NVFP4 decode scoring kernel's unit loop (decode_score_kernel<NT=4, NVFP4>,
# 32 score rows), from the library object built by CMake (indexer_kernels.cu unchanged since 8610d70).
# Needs cuobjdump and nvdisasm (pip wheels nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) on PATH.
# The loop runs from the DEPBAR at its top (0x4650) to its back edge (0x8470); the request-change
# block (0x4f30 .. 0x65c0, taken only when a warp crosses into the next request) is left out.
set -e
OBJ=${1:-build/CMakeFiles/flashmsa.dir/src/cuda/sm90/indexer_kernels.cu.o}
cuobjdump -sass "$OBJ" | awk '/decode_score_kernelILi4ELb1/{p=1;next} p&&/Function :/{p=0} p' > /tmp/nt4.sass
a=$(grep -n '/\*4650\*/' /tmp/nt4.sass | cut -d: -f1); b=$(grep -n '/\*4f20\*/' /tmp/nt4.sass | cut -d: -f1)
c=$(grep -n '/\*65c0\*/' /tmp/nt4.sass | cut -d: -f1); d=$(grep -n '/\*8470\*/' /tmp/nt4.sass | cut -d: -f1)
(sed -n "${a},${b}p" /tmp/nt4.sass; sed -n "${c},${d}p" /tmp/nt4.sass) > hot.sass
echo "instructions: $(grep -cP '^\s+/\*[0-9a-f]+\*/' hot.sass)"
grep -oP '^\s+/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?\K[A-Z0-9_.]+' hot.sass | sed 's/\..*//' | sort | uniq -c | sort -rn
echo "IMAD.U32 moves from a uniform register: $(grep -cP 'IMAD.U32 R\d+, RZ, RZ, UR' hot.sass)"
