#pragma once
// What every fuzz target shares: a private scratch folder for the files it writes, a file writer, and
// LSEQ_FUZZ_EXPECT, which turns a broken promise of the code under test into a finding (libFuzzer keeps the input).
// lseq::Error is a clean refusal of bad input; guarded() swallows it and lets anything else escape, so that
// libFuzzer reports any other exception (std::terminate) as a finding too.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "util/error.h"

namespace lseq::fuzz {

// This process's scratch folder under $TMPDIR (scripts/fuzz.sh points TMPDIR into the build folder), removed when
// the process exits normally. The path is never freed: the clean-up at exit still needs it.
inline std::filesystem::path* scratch_path = nullptr;

inline void remove_scratch_dir() {
  std::error_code ec;
  std::filesystem::remove_all(*scratch_path, ec);
}

inline const std::filesystem::path& scratch_dir() {
  if (scratch_path == nullptr) {
    scratch_path = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                             ("lseq-fuzz-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*scratch_path);
    std::atexit(remove_scratch_dir);
  }
  return *scratch_path;
}

inline std::string scratch_file(const std::string& name) { return (scratch_dir() / name).string(); }

inline void write_bytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
}

// A promise of the code under test that the input broke: print it and abort (libFuzzer keeps the input).
#define LSEQ_FUZZ_EXPECT(condition, what)                                                             \
  do {                                                                                                 \
    if (!(condition)) {                                                                                \
      std::fprintf(stderr, "fuzz finding: %s (%s:%d: %s)\n", std::string(what).c_str(), __FILE__,     \
                   __LINE__, #condition);                                                              \
      std::abort();                                                                                    \
    }                                                                                                  \
  } while (0)

// Runs body; lseq::Error (a refusal with a message) returns false, success true; other exceptions escape.
template <typename Body>
bool guarded(Body&& body) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    LSEQ_FUZZ_EXPECT(*e.what() != '\0', "an lseq::Error without a message");
    return false;
  }
}

// Fuzzing runs millions of inputs: warnings about each bad line would only slow it down.
inline void quiet_logging() { spdlog::set_level(spdlog::level::off); }

}  // namespace lseq::fuzz
