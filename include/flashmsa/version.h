// FlashMSA — version and build information.
#pragma once

namespace flashmsa {

/// Library version "MAJOR.MINOR.PATCH".
const char* version();
/// True when this build contains CUDA (SM90) kernels.
bool built_with_cuda();

}  // namespace flashmsa
