# CUTLASS/CuTe headers for the SM90 kernels (wgmma atoms), from the pinned pip wheel
# nvidia-cutlass (its cutlass_library package carries the C++ include tree).
# Override with -DFLASHMSA_CUTLASS_INCLUDE_DIR=/path/to/cutlass/include.
set(FLASHMSA_CUTLASS_VERSION "4.2.0.0")
set(FLASHMSA_CUTLASS_INCLUDE_DIR "" CACHE PATH "CUTLASS include directory (holds cute/ and cutlass/)")
if(NOT FLASHMSA_CUTLASS_INCLUDE_DIR)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
        "import importlib.metadata as m, cutlass_library, os; print(m.version('nvidia-cutlass')); print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
      OUTPUT_VARIABLE _cutlass_out RESULT_VARIABLE _cutlass_rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_cutlass_rc EQUAL 0)
      string(REPLACE "\n" ";" _cutlass_out "${_cutlass_out}")
      list(GET _cutlass_out 0 _cutlass_ver)
      list(GET _cutlass_out 1 _cutlass_inc)
      if(NOT _cutlass_ver STREQUAL FLASHMSA_CUTLASS_VERSION)
        message(WARNING "FlashMSA is pinned to nvidia-cutlass ${FLASHMSA_CUTLASS_VERSION}, found ${_cutlass_ver}")
      endif()
      set(FLASHMSA_CUTLASS_INCLUDE_DIR "${_cutlass_inc}" CACHE PATH "CUTLASS include directory" FORCE)
    endif()
  endif()
endif()
if(NOT EXISTS "${FLASHMSA_CUTLASS_INCLUDE_DIR}/cute/arch/mma_sm90_gmma.hpp")
  message(FATAL_ERROR "FlashMSA's CUDA kernels need the CUTLASS/CuTe headers: "
                      "python3 -m pip install nvidia-cutlass==${FLASHMSA_CUTLASS_VERSION} "
                      "(or pass -DFLASHMSA_CUTLASS_INCLUDE_DIR=...), or configure with -DFLASHMSA_CUDA=OFF")
endif()
message(STATUS "FlashMSA: CUTLASS headers ${FLASHMSA_CUTLASS_INCLUDE_DIR}")
