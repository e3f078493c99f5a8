// The softmax cross-entropy of linear_cross_entropy (cute_gemm/loss.py): one kernel over the
// logits that a GEMM just wrote, leaving in their place the loss's gradient with respect to them.
// (The op, softmax_cross_entropy_, is in cross_entropy_op.cpp; this header stays free of torch's so
// that the .cu file builds with the toolkit's headers alone.)
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "row_dtype.h"

namespace cute_gemm {

// logits: rows x cols elements of type dtype, row r at logits + r * ld (in elements); target:
// rows int64 class indices. For each row: loss[r] = logsumexp(row) - row[target[r]] (0 where
// target[r] == ignore_index), and the row is overwritten with (softmax(row) - onehot(target[r])) *
// *scale (scale null: 1; zeros where ignored): the gradient of the loss summed and scaled by *scale
// with respect to the logits. A target outside [0, cols) other than ignore_index gives that row a
// NaN loss and NaN gradient. One block per row: rows < 2^31.
cudaError_t softmax_xent_rows(void* logits, RowDType dtype, int64_t rows, int64_t cols, int64_t ld,
                              const int64_t* target, int64_t ignore_index, const float* scale, float* loss,
                              cudaStream_t stream);

}  // namespace cute_gemm
