# -DLSEQ_FUZZ=ON (scripts/sanitized-tree.sh, for scripts/fuzz.sh and scripts/sanitize.sh): everything is compiled
# with AddressSanitizer, UndefinedBehaviorSanitizer (any finding aborts) and libFuzzer's coverage instrumentation,
# the targets under fuzz/ are linked with libFuzzer and the rest (the programs, the tests) with the sanitizers'
# runtimes alone. clang only; the CUDA code is left out. Nothing changes when it is OFF.
option(LSEQ_FUZZ "Build the libFuzzer targets under fuzz/ with ASan and UBSan (clang, CPU only)" OFF)
if(LSEQ_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "lseq: LSEQ_FUZZ=ON needs clang (libFuzzer); configure with -DCMAKE_CXX_COMPILER=clang++ "
                        "-DCMAKE_C_COMPILER=clang, or run scripts/fuzz.sh")
  endif()
  if(NOT LSEQ_CUDA STREQUAL "OFF")
    message(FATAL_ERROR "lseq: LSEQ_FUZZ=ON builds the CPU code only; add -DLSEQ_CUDA=OFF")
  endif()
  set(LSEQ_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(-fsanitize=fuzzer-no-link ${LSEQ_FUZZ_SANITIZERS})
  add_link_options(${LSEQ_FUZZ_SANITIZERS})
endif()
