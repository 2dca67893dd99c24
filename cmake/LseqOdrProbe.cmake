# -DLSEQ_ODR_PROBE=ON (scripts/odr-check.sh): one executable, lseq_odr_probe, made of every library linked whole
# (every object file, referenced or not) and every program's and benchmark's own sources, each program's main renamed.
# Under link-time optimisation with -Werror=odr its one link compares the definitions of every translation unit of
# the project, where linking each program under LTO compared only the objects that program pulls in, and redid the
# whole-program work for each program (most of the check's time). The probe is never run.
option(LSEQ_ODR_PROBE "Build lseq_odr_probe, the link that scripts/odr-check.sh checks" OFF)
if(NOT LSEQ_ODR_PROBE)
  return()
endif()

# The targets of a folder and of the folders below it.
function(lseq_targets_below folder out)
  get_property(found DIRECTORY ${folder} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subfolders DIRECTORY ${folder} PROPERTY SUBDIRECTORIES)
  foreach(subfolder ${subfolders})
    lseq_targets_below(${subfolder} below)
    list(APPEND found ${below})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

if(NOT LSEQ_BUILD_BENCH)
  message(FATAL_ERROR "lseq: LSEQ_ODR_PROBE=ON checks the benchmarks too; configure with -DLSEQ_BUILD_BENCH=ON")
endif()
# The libraries of lib/, and the programs of apps/ and bench/.
lseq_targets_below(${CMAKE_SOURCE_DIR} targets)
set(libraries)
set(programs)
foreach(target ${targets})
  get_target_property(type ${target} TYPE)
  get_target_property(folder ${target} SOURCE_DIR)
  cmake_path(RELATIVE_PATH folder BASE_DIRECTORY ${CMAKE_SOURCE_DIR})
  if(type STREQUAL "STATIC_LIBRARY" AND folder MATCHES "^lib/")
    list(APPEND libraries ${target})
  elseif(type STREQUAL "EXECUTABLE" AND folder MATCHES "^(apps|bench)(/|$)")
    list(APPEND programs ${target})
  endif()
endforeach()

add_executable(lseq_odr_probe ${CMAKE_CURRENT_LIST_DIR}/odr_probe_main.cpp)
foreach(program ${programs})
  get_target_property(folder ${program} SOURCE_DIR)
  get_target_property(sources ${program} SOURCES)
  foreach(source ${sources})
    cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY ${folder})
    target_sources(lseq_odr_probe PRIVATE ${source})
    # A program's main becomes an ordinary function of its own name; nothing else in the sources is called main.
    string(MAKE_C_IDENTIFIER "lseq_odr_main_${program}" renamed)
    set_source_files_properties(${source} TARGET_DIRECTORY lseq_odr_probe PROPERTIES COMPILE_DEFINITIONS main=${renamed})
  endforeach()
  get_target_property(links ${program} LINK_LIBRARIES)
  list(REMOVE_ITEM links ${libraries})
  target_link_libraries(lseq_odr_probe PRIVATE ${links})  # what a program needs beside the libraries (cpp-httplib)
endforeach()
# Every object file of every library, referenced or not (the libraries link each other as well, so they cannot
# take CMake's WHOLE_ARCHIVE feature here; the archives named again after them add nothing).
set(whole)
foreach(library ${libraries})
  list(APPEND whole $<TARGET_FILE:${library}>)
endforeach()
target_link_options(lseq_odr_probe PRIVATE -Wl,--whole-archive ${whole} -Wl,--no-whole-archive)
target_link_libraries(lseq_odr_probe PRIVATE ${libraries})
message(STATUS "lseq: lseq_odr_probe links ${libraries} whole, with the sources of ${programs}")
