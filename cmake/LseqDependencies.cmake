# System packages only (scripts/install-deps.sh installs them). Each failure names the package to install.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)

macro(lseq_require found what package)
  if(NOT ${found})
    message(FATAL_ERROR "lseq: ${what} not found; install the package '${package}' (or run scripts/install-deps.sh)")
  endif()
endmacro()

find_package(yaml-cpp CONFIG QUIET)
lseq_require(yaml-cpp_FOUND "yaml-cpp" libyaml-cpp-dev)
# yaml-cpp 0.7 (Debian 12) exports 'yaml-cpp', 0.8 (Ubuntu 24.04) 'yaml-cpp::yaml-cpp'.
if(TARGET yaml-cpp::yaml-cpp)
  set(LSEQ_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(LSEQ_YAML_TARGET yaml-cpp)
endif()

find_package(fmt CONFIG QUIET)
lseq_require(fmt_FOUND "fmt" libfmt-dev)
find_package(spdlog CONFIG QUIET)
lseq_require(spdlog_FOUND "spdlog" libspdlog-dev)
find_package(nlohmann_json CONFIG QUIET)
lseq_require(nlohmann_json_FOUND "nlohmann-json" nlohmann-json3-dev)
# CLI11 reads the command line under the option registry (2.1.2 on Debian 12, 2.4.1 on Ubuntu 24.04).
find_package(CLI11 CONFIG QUIET)
lseq_require(CLI11_FOUND "CLI11" libcli11-dev)
find_package(ZLIB QUIET)
lseq_require(ZLIB_FOUND "zlib" zlib1g-dev)

pkg_check_modules(SENTENCEPIECE QUIET IMPORTED_TARGET sentencepiece)
lseq_require(SENTENCEPIECE_FOUND "SentencePiece" libsentencepiece-dev)
find_library(SENTENCEPIECE_TRAIN_LIB sentencepiece_train HINTS ${SENTENCEPIECE_LIBRARY_DIRS})
lseq_require(SENTENCEPIECE_TRAIN_LIB "SentencePiece trainer library" libsentencepiece-dev)

# PCRE2 (8-bit, UTF + Unicode properties): GPT-2's byte-level BPE pre-tokenizer regex (lib/data/byte_level_bpe.cpp).
# Optional like lsserve's library: the GPU machine's fixed image may lack it, and everything else builds without it.
pkg_check_modules(PCRE2 QUIET IMPORTED_TARGET libpcre2-8)
if(LSEQ_BPE STREQUAL "ON")
  lseq_require(PCRE2_FOUND "PCRE2 (GPT-2's byte-level BPE pre-tokenizer)" libpcre2-dev)
endif()
if(PCRE2_FOUND AND NOT LSEQ_BPE STREQUAL "OFF")
  set(LSEQ_WITH_BPE ON)
else()
  set(LSEQ_WITH_BPE OFF)
  if(NOT LSEQ_BPE STREQUAL "OFF")
    message(WARNING "lseq: PCRE2 not found: GPT-2 BPE vocabularies (vocab.json + merges.txt) are refused and their "
                    "tests skipped (install libpcre2-dev, or configure with -DLSEQ_BPE=ON to make this an error)")
  endif()
endif()

pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
lseq_require(OPENBLAS_FOUND "OpenBLAS" libopenblas-dev)

# cpp-httplib (lsserve's HTTP server): Debian 12 ships 0.11, Ubuntu 24.04 0.14, both as a compiled library with a
# pkg-config file; a CMake package (httplib::httplib) is taken where there is no pkg-config file.
pkg_check_modules(CPPHTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
if(CPPHTTPLIB_FOUND)
  set(LSEQ_HTTPLIB_TARGET PkgConfig::CPPHTTPLIB)
else()
  find_package(httplib CONFIG QUIET)
  set(CPPHTTPLIB_FOUND ${httplib_FOUND})
  set(LSEQ_HTTPLIB_TARGET httplib::httplib)
endif()
if(LSEQ_SERVE STREQUAL "ON")
  lseq_require(CPPHTTPLIB_FOUND "cpp-httplib (the HTTP library of lsserve)" libcpp-httplib-dev)
endif()
if(CPPHTTPLIB_FOUND AND NOT LSEQ_SERVE STREQUAL "OFF")
  set(LSEQ_WITH_SERVE ON)
  set(LSEQ_WITH_SERVE_STATUS "built")
else()
  set(LSEQ_WITH_SERVE OFF)
  if(LSEQ_SERVE STREQUAL "OFF")
    set(LSEQ_WITH_SERVE_STATUS "not built (LSEQ_SERVE=OFF)")
  else()
    set(LSEQ_WITH_SERVE_STATUS "not built: cpp-httplib not found (libcpp-httplib-dev); its test is skipped")
    message(WARNING "lseq: cpp-httplib not found: lsserve is not built and tests/apps/serve_test.sh is skipped "
                    "(install libcpp-httplib-dev, or configure with -DLSEQ_SERVE=ON to make this an error)")
  endif()
endif()

if(LSEQ_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    find_package(GTest QUIET)
  endif()
  lseq_require(GTest_FOUND "GoogleTest" libgtest-dev)
endif()
