// The opt-in autotune cache (CUTE_GEMM_AUTOTUNE=1): the choice of kernel config and split count
// that csrc/gemm.cpp timed for a problem, kept in memory and in a text file per GPU name, package
// version and config table, so later calls and later processes skip the timing.
//
// File: $CUTE_GEMM_CACHE_DIR, else $XDG_CACHE_HOME/cute_gemm, else ~/.cache/cute_gemm (else
// <temp>/cute_gemm-<uid>), named autotune-<GPU name>-<version>-<config tables>.txt, so another
// version or other configs use another file. Its first line names the format and the file; a file
// whose first line differs is ignored, and so is any line that does not parse. Writers take an
// exclusive flock on "<file>.lock" (waiting 2 s at most), merge the file's entries with theirs and
// rename a complete new file, created under an unpredictable name, over it: several processes may
// tune at once, and a reader never sees half a file.
// The folder is created with mode 0700 and used only while it is a folder (not a link) of this
// user's that nobody else can write to; the files only while they are regular files of this
// user's (no link followed, no FIFO waited on). Otherwise, and on any I/O error, tuned choices stay
// in memory: the cache is an optimization, never a reason for a call to fail or wait.
#pragma once

#include <optional>
#include <string>

namespace cute_gemm::autotune {

struct Choice {
  int cfg = 0;     // row of the family's configs.h
  int splits = 1;  // split-K slices (SM90 family)
  double us = 0;   // the time measured for it
};

// On when CUTE_GEMM_AUTOTUNE=1, read on every call with the other knobs (knobs.cpp, read_overrides).

// The cache file for a GPU; `tables` fingerprints the config tables the indices refer to.
std::string cache_path(const std::string& gpu_name, const std::string& tables);

// The choice recorded for `key` in that file (loaded from disk on first use), if any.
std::optional<Choice> find(const std::string& path, const std::string& key);

// Record a choice in memory and merge it into the file; false where the file could not be written.
bool remember(const std::string& path, const std::string& key, const Choice& choice);

}  // namespace cute_gemm::autotune
