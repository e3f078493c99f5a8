// The autotune cache of csrc/autotune.h: memory, then a text file shared between processes.
// Standard C++ and POSIX only (no torch): tests/test_autotune_file.py builds it on the CPU.
#include "autotune.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>
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

// A file larger than this is not a cache this library wrote (an entry is under 100 bytes).
constexpr off_t kMaxFileBytes = off_t(16) << 20;

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

std::string header_of(const std::string& name) { return "cute_gemm-autotune 1 " + name; }

// A file descriptor closed with the scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

bool owned_by_me(const struct stat& st) { return st.st_uid == ::geteuid(); }

// The cache folder, opened for the *at() calls below, so that every file is looked up in the folder
// that was checked: created with mode 0700 where missing, and refused (-1) unless it is a folder, not
// a symbolic link, owned by this user and writable by nobody else (on a shared or hostile folder a
// planted link or file could otherwise redirect this process's writes).
int open_private_dir(const fs::path& dir) {
  std::error_code ec;
  if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);  // with the user's umask
  ::mkdir(dir.c_str(), 0700);  // (fails where it exists: checked below either way)
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode) || !owned_by_me(st) || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Opens `name` in the folder without following a link or blocking (a FIFO answers at once), and
// keeps it only if it is a regular file of this user's, of a sane size.
int open_regular(int dir, const std::string& name, int flags, mode_t mode = 0600) {
  const int fd = ::openat(dir, name.c_str(), flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
  if (fd < 0) return -1;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !owned_by_me(st) || st.st_size > kMaxFileBytes) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The valid entries of `name` in the folder; an unreadable, stale, foreign or odd file gives none.
// (C stdio and strtol, not streams: numbers never go through the iostream locale facets, which
// crashed an extension built against another libstdc++ copy; see num() in checks.h.)
std::unordered_map<std::string, Choice> read_entries(int dir, const std::string& name) {
  std::unordered_map<std::string, Choice> entries;
  const int fd = open_regular(dir, name, O_RDONLY);
  if (fd < 0) return entries;
  std::FILE* in = ::fdopen(fd, "r");
  if (in == nullptr) {
    ::close(fd);
    return entries;
  }
  std::string line;
  auto next_line = [&]() {
    line.clear();
    for (int ch = std::fgetc(in); ch != EOF && ch != '\n'; ch = std::fgetc(in)) line += char(ch);
    return !(line.empty() && std::feof(in));
  };
  if (next_line() && line == header_of(name)) {
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
      // A torn or hand-edited line is ignored; the caller checks the rest against what its own
      // timing could have chosen (gemm.cpp).
      if (ok && c.cfg >= 0 && c.cfg <= 64 && c.splits >= 1 && c.splits <= 64 && c.us >= 0) {
        entries[line.substr(0, tab)] = c;
      }
    }
  }
  std::fclose(in);
  return entries;
}

// An exclusive flock on fd, waiting at most kLockWait: a process that holds the lock for longer
// (stopped in a debugger, say) costs this one its write, not its progress.
constexpr auto kLockWait = std::chrono::milliseconds(2000);
bool lock_bounded(int fd) {
  const auto deadline = std::chrono::steady_clock::now() + kLockWait;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EWOULDBLOCK && errno != EINTR) return false;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Merge `entries` into the file under an exclusive lock, through a temporary file of an
// unpredictable name, created exclusively, then renamed over the file.
bool write_merged(const std::string& path, const std::unordered_map<std::string, Choice>& entries) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  const Fd dir(open_private_dir(p.parent_path()));
  if (dir.fd < 0) return false;
  const Fd lock(open_regular(dir.fd, name + ".lock", O_CREAT | O_RDWR));
  if (lock.fd < 0 || !lock_bounded(lock.fd)) return false;
  auto merged = read_entries(dir.fd, name);  // what other processes wrote meanwhile
  for (const auto& [key, c] : entries) merged[key] = c;
  std::string text = header_of(name) + "\n";
  for (const auto& [key, c] : merged) {
    text += key + "\t" + std::to_string(c.cfg) + " " + std::to_string(c.splits) + " " + std::to_string(c.us) + "\n";
  }
  static std::atomic<unsigned> serial{0};
  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    tmp = name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++) + "." + std::to_string(rd());
    fd = ::openat(dir.fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (fd < 0) return false;
  bool ok = true;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    ok = n > 0;
    if (ok) done += size_t(n);
  }
  ok = ::close(fd) == 0 && ok;
  ok = ok && ::renameat(dir.fd, tmp.c_str(), dir.fd, name.c_str()) == 0;
  if (!ok) ::unlinkat(dir.fd, tmp.c_str(), 0);
  return ok;  // (the lock is released as its descriptor closes)
}

FileEntries& loaded(const std::string& path) {  // with cache_mutex() held
  FileEntries& f = files()[path];
  if (!f.loaded) {
    const fs::path p(path);
    const Fd dir(open_private_dir(p.parent_path()));
    if (dir.fd >= 0) f.entries = read_entries(dir.fd, p.filename().string());
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
    dir /= "cute_gemm-" + std::to_string(::geteuid());
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

bool remember(const std::string& path, const std::string& key, const Choice& choice) {
  std::unordered_map<std::string, Choice> mine;
  {
    std::lock_guard<std::mutex> guard(cache_mutex());
    FileEntries& f = loaded(path);
    f.entries[key] = choice;
    mine = f.entries;
  }
  return write_merged(path, mine);
}

}  // namespace cute_gemm::autotune
