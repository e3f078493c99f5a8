// Operator schema and implementations. The module is a plain CPython extension with no Python
// functions of its own: importing cute_gemm._C runs the static registrations below.
#include <Python.h>
#include <torch/library.h>

#include "gemm.h"

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

TORCH_LIBRARY(cute_gemm, m) {
  m.def("mm(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(cute_gemm, CUDA, m) {
  m.impl("mm", &cute_gemm::mm);
}

// CPU and sparse tensors reach the same checks, so the error names the argument and the rule
// instead of the dispatcher's "could not run with arguments from the ... backend".
#define CUTE_GEMM_CHECKS_ONLY(KEY) \
  TORCH_LIBRARY_IMPL(cute_gemm, KEY, m) { m.impl("mm", &cute_gemm::mm); }
CUTE_GEMM_CHECKS_ONLY(CPU)
CUTE_GEMM_CHECKS_ONLY(SparseCPU)
CUTE_GEMM_CHECKS_ONLY(SparseCUDA)
CUTE_GEMM_CHECKS_ONLY(SparseCsrCPU)
CUTE_GEMM_CHECKS_ONLY(SparseCsrCUDA)
