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
  m.def("mm(Tensor a, Tensor b, *, ScalarType? out_dtype=None) -> Tensor");
  m.def("mm.out(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)");
  m.def(
      "addmm(Tensor input, Tensor a, Tensor b, *, float beta=1, float alpha=1, str? activation=None, "
      "ScalarType? out_dtype=None) -> Tensor");
  m.def(
      "addmm.out(Tensor input, Tensor a, Tensor b, *, float beta=1, float alpha=1, str? activation=None, "
      "ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)");
  m.def("bmm(Tensor a, Tensor b, *, ScalarType? out_dtype=None) -> Tensor");
  m.def("bmm.out(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)");
}

// CUDA runs the ops; CPU and sparse tensors reach the same checks, so the error names the
// argument and the rule instead of the dispatcher's "could not run with arguments from the ...
// backend".
#define CUTE_GEMM_IMPLS(KEY)                    \
  TORCH_LIBRARY_IMPL(cute_gemm, KEY, m) {       \
    m.impl("mm", &cute_gemm::mm);               \
    m.impl("mm.out", &cute_gemm::mm_out);       \
    m.impl("addmm", &cute_gemm::addmm);         \
    m.impl("addmm.out", &cute_gemm::addmm_out); \
    m.impl("bmm", &cute_gemm::bmm);             \
    m.impl("bmm.out", &cute_gemm::bmm_out);     \
  }
CUTE_GEMM_IMPLS(CUDA)
CUTE_GEMM_IMPLS(CPU)
CUTE_GEMM_IMPLS(SparseCPU)
CUTE_GEMM_IMPLS(SparseCUDA)
CUTE_GEMM_IMPLS(SparseCsrCPU)
CUTE_GEMM_IMPLS(SparseCsrCUDA)
