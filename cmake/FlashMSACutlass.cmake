# CUTLASS/CuTe headers for the SM90 kernels (wgmma atoms). Default: the subset vendored in
# third_party/cutlass/include, copied from the pinned wheel nvidia-cutlass==4.2.0.0 by
# scripts/vendor-cutlass.sh (no download at build time: the GPU machine is offline).
# Override with -DFLASHMSA_CUTLASS_INCLUDE_DIR=/path/to/cutlass/include (a full tree).
set(FLASHMSA_CUTLASS_VERSION "4.2.0.0")
set(FLASHMSA_CUTLASS_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/third_party/cutlass/include"
    CACHE PATH "CUTLASS include directory (holds cute/ and cutlass/)")
if(NOT FLASHMSA_CUTLASS_INCLUDE_DIR)  # an empty cache entry (older build trees): the default
  set(FLASHMSA_CUTLASS_INCLUDE_DIR "${PROJECT_SOURCE_DIR}/third_party/cutlass/include" CACHE PATH
      "CUTLASS include directory (holds cute/ and cutlass/)" FORCE)
endif()
if(NOT EXISTS "${FLASHMSA_CUTLASS_INCLUDE_DIR}/cute/arch/mma_sm90_gmma.hpp")
  message(FATAL_ERROR "FlashMSA's CUDA kernels need the CUTLASS/CuTe headers, not found in "
                      "FLASHMSA_CUTLASS_INCLUDE_DIR=${FLASHMSA_CUTLASS_INCLUDE_DIR}: restore "
                      "third_party/cutlass (scripts/vendor-cutlass.sh), pass -DFLASHMSA_CUTLASS_INCLUDE_DIR=..., "
                      "or configure with -DFLASHMSA_CUDA=OFF")
endif()
message(STATUS "FlashMSA: CUTLASS ${FLASHMSA_CUTLASS_VERSION} headers ${FLASHMSA_CUTLASS_INCLUDE_DIR}")
