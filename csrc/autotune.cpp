// The autotune cache of csrc/autotune.h: memory, then a text file shared between processes.
#include "autotune.h"

#include <c10/util/Exception.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <unordered_map>

#define CUTE_GEMM_STR2(x) #x
#define CUTE_GEMM_STR(x) CUTE_GEMM_STR2(x)
#if defined(CUTE_GEMM_VERSION)
#define CUTE_GEMM_VERSION_STRING CUTE_GEMM_STR(CUTE_GEMM_VERSION)
#else
#define CUTE_GEMM_VERSION_STRING "dev"
#endif

namespace cute_gemm::autotune {
namespace {

namespace fs = std::filesystem;

struct FileEntries {
  bool loaded = false;
  std::unordered_map<std::string, Choice> entries;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<std::string, FileEntries>& files() {
  static std::unordered_map<std::string, FileEntries> f;
  return f;
}

// Letters, digits, '.', '-' and '_' only: a GPU name becomes part of a file name.
std::string file_safe(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

std::string header_of(const std::string& path) {
  return "cute_gemm-autotune 1 " + fs::path(path).filename().string();
}

// The file's valid entries; an unreadable, stale or foreign file gives none. (C stdio and
// strtol, not streams: numbers never go through the iostream locale facets, which crashed an
// extension built against another libstdc++ copy; see num() in gemm.cpp.)
std::unordered_map<std::string, Choice> read_file(const std::string& path) {
  std::unordered_map<std::string, Choice> entries;
  std::FILE* in = std::fopen(path.c_str(), "r");
  if (in == nullptr) return entries;
  std::string line;
  auto next_line = [&]() {
    line.clear();
    for (int ch = std::fgetc(in); ch != EOF && ch != '\n'; ch = std::fgetc(in)) line += char(ch);
    return !(line.empty() && std::feof(in));
  };
  if (next_line() && line == header_of(path)) {
    while (next_line()) {
      const size_t tab = line.find('\t');
      if (tab == std::string::npos || tab == 0) continue;
      const char* text = line.c_str() + tab + 1;
      char* end = nullptr;
      Choice c;
      c.cfg = int(std::strtol(text, &end, 10));
      bool ok = end != text && *end == ' ';
      if (ok) {
        text = end + 1;
        c.splits = int(std::strtol(text, &end, 10));
        ok = end != text && *end == ' ';
      }
      if (ok) {
        text = end + 1;
        c.us = std::strtod(text, &end);
        ok = end != text && *end == '\0';
      }
      // A torn or hand-edited line is ignored.
      if (ok && c.cfg >= 0 && c.cfg <= 64 && c.splits >= 1 && c.splits <= 64 && c.us >= 0) {
        entries[line.substr(0, tab)] = c;
      }
    }
  }
  std::fclose(in);
  return entries;
}

// Merge `entries` into the file under an exclusive lock, through a renamed temporary file.
bool write_merged(const std::string& path, const std::unordered_map<std::string, Choice>& entries) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return false;
  const int lock = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0) return false;
  bool ok = ::flock(lock, LOCK_EX) == 0;
  if (ok) {
    auto merged = read_file(path);  // what other processes wrote meanwhile
    for (const auto& [key, c] : entries) merged[key] = c;
    static std::atomic<int> serial{0};
    const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
    std::string text = header_of(path) + "\n";
    for (const auto& [key, c] : merged) {
      text += key + "\t" + std::to_string(c.cfg) + " " + std::to_string(c.splits) + " " + std::to_string(c.us) + "\n";
    }
    std::FILE* out = std::fopen(tmp.c_str(), "w");
    ok = out != nullptr && std::fwrite(text.data(), 1, text.size(), out) == text.size();
    if (out != nullptr) ok = std::fclose(out) == 0 && ok;
    ok = ok && std::rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok) std::remove(tmp.c_str());
  }
  ::close(lock);  // releases the lock
  return ok;
}

FileEntries& loaded(const std::string& path) {  // with cache_mutex() held
  FileEntries& f = files()[path];
  if (!f.loaded) {
    f.entries = read_file(path);
    f.loaded = true;
  }
  return f;
}

}  // namespace

std::string cache_path(const std::string& gpu_name, const std::string& tables) {
  fs::path dir;
  if (const char* d = std::getenv("CUTE_GEMM_CACHE_DIR"); d != nullptr && *d != '\0') {
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    dir = fs::path(x) / "cute_gemm";
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    dir = fs::path(h) / ".cache" / "cute_gemm";
  } else {
    std::error_code ec;
    dir = fs::temp_directory_path(ec);
    if (ec) dir = "/tmp";
    dir /= "cute_gemm";
  }
  return (dir / ("autotune-" + file_safe(gpu_name) + "-" + CUTE_GEMM_VERSION_STRING + "-" + tables + ".txt")).string();
}

std::optional<Choice> find(const std::string& path, const std::string& key) {
  std::lock_guard<std::mutex> guard(cache_mutex());
  const FileEntries& f = loaded(path);
  const auto it = f.entries.find(key);
  if (it == f.entries.end()) return std::nullopt;
  return it->second;
}

void remember(const std::string& path, const std::string& key, const Choice& choice) {
  std::unordered_map<std::string, Choice> mine;
  {
    std::lock_guard<std::mutex> guard(cache_mutex());
    FileEntries& f = loaded(path);
    f.entries[key] = choice;
    mine = f.entries;
  }
  if (!write_merged(path, mine)) {
    TORCH_WARN_ONCE("cute_gemm: could not write the autotune cache ", path,
                    " (set CUTE_GEMM_CACHE_DIR to a writable folder); tuned choices stay in memory only");
  }
}

}  // namespace cute_gemm::autotune
