// The opt-in autotune cache (CUTE_GEMM_AUTOTUNE=1): the choice of kernel config and split count
// that csrc/gemm.cpp timed for a problem, kept in memory and in a text file per GPU name, package
// version and config table, so later calls and later processes skip the timing.
//
// File: $CUTE_GEMM_CACHE_DIR, else $XDG_CACHE_HOME/cute_gemm, else ~/.cache/cute_gemm, named
// autotune-<GPU name>-<version>-<config tables>.txt, so another version or other configs use
// another file. Its first line names the format and the file; a file whose first line differs is
// ignored, and so is any line that does not parse. Writers take an exclusive flock on "<file>.lock", merge
// the file's entries with theirs and rename a complete new file over it: several processes may
// tune at once, and a reader never sees half a file. I/O errors only warn: the cache is an
// optimization, never a reason for a call to fail.
#pragma once

#include <optional>
#include <string>

namespace cute_gemm::autotune {

struct Choice {
  int cfg = 0;     // row of the family's configs.h
  int splits = 1;  // split-K slices (SM90 family)
  double us = 0;   // the time measured for it
};

// On when CUTE_GEMM_AUTOTUNE=1, read on every call with the other knobs (gemm.cpp, autotune_on).

// The cache file for a GPU; `tables` fingerprints the config tables the indices refer to.
std::string cache_path(const std::string& gpu_name, const std::string& tables);

// The choice recorded for `key` in that file (loaded from disk on first use), if any.
std::optional<Choice> find(const std::string& path, const std::string& key);

// Record a choice in memory and merge it into the file.
void remember(const std::string& path, const std::string& key, const Choice& choice);

}  // namespace cute_gemm::autotune
