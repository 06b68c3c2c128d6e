// flashmsa._C — the python module object. Importing it runs the static registrations
// of the op files (TORCH_LIBRARY_FRAGMENT(flashmsa, ...)); the ops are then reachable as
// torch.ops.flashmsa.<name>. No python API of its own: everything goes through torch.ops.
#include <Python.h>
#include <torch/library.h>

#include <string>

#include "flashmsa/memory.h"
#include "flashmsa/version.h"

namespace {
bool built_with_cuda() { return flashmsa::built_with_cuda(); }
std::string version() { return flashmsa::version(); }
// flashmsa::release_cached_workspace (flashmsa/memory.h); errors as RuntimeError.
void release_cached_workspace() {
  const flashmsa::Status st = flashmsa::release_cached_workspace();
  TORCH_CHECK(st.ok(), st.message());
}
}  // namespace

// The namespace is created here with the build queries; each op group adds its schemas
// with a fragment.
TORCH_LIBRARY(flashmsa, m) {
  m.def("built_with_cuda() -> bool", &built_with_cuda);
  m.def("version() -> str", &version);
  m.def("release_cached_workspace() -> ()", &release_cached_workspace);
}

extern "C" PyObject* PyInit__C(void) {
  static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C",
                               "FlashMSA torch ops (see torch.ops.flashmsa)", -1,
                               nullptr, nullptr, nullptr, nullptr, nullptr};
  return PyModule_Create(&module);
}
