#!/usr/bin/env bash
# The architecture of docs/architecture.md, checked from the sources:
#   - each library's CMakeLists.txt links (target_link_libraries) the rooms it may use; its files include nothing
#     from a room it does not link, and it links no room it never includes (the links are the arrows);
#   - the arrows have no cycle;
#   - each program in apps/ includes only from the libraries it links;
#   - no folder under lib/ holds more than 25 source files directly.
# Usage: bash tests/architecture_test.sh [source dir]
set -euo pipefail
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
cd "$root"
failures=0
problem() { echo "architecture: $*" >&2; failures=$((failures + 1)); }

# A room is a folder with a CMakeLists.txt that defines one library: lib/util -> util, lib/core/model -> core/model.
declare -A library_of room_of_library
for cmake_file in $(find lib -name CMakeLists.txt | sort); do
  library=$(sed -n 's/^add_library(\(lseq_[a-z_]*\) .*/\1/p' "$cmake_file")
  [ -n "$library" ] || continue
  room=$(dirname "${cmake_file#lib/}")
  library_of[$room]=$library
  room_of_library[$library]=$room
done

# The lseq_* libraries a CMakeLists.txt links (every target in it).
linked_libraries() {
  tr '\n' ' ' <"$1" | grep -o 'target_link_libraries([^)]*)' | grep -o 'lseq_[a-z_]*' | sort -u
}

# The deepest room that contains a path: "core/model/layers/x.h" is in core/model, not in core.
room_of_path() {
  local path=$1 best=""
  for room in "${!library_of[@]}"; do
    case $path in "$room"/*) [ ${#room} -gt ${#best} ] && best=$room ;; esac
  done
  echo "$best"
}

declare -A edges
for room in $(printf '%s\n' "${!library_of[@]}" | sort); do
  own=${library_of[$room]}
  mapfile -t files < <(find "lib/$room" -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) |
    while read -r f; do [ "$(room_of_path "${f#lib/}")" = "$room" ] && echo "$f"; done)
  links=$(linked_libraries "lib/$room/CMakeLists.txt" | grep -vx "$own" || true)
  edges[$own]=$links
  declare -A used=()
  while read -r path; do
    [ -n "$path" ] || continue
    target=$(room_of_path "$path")
    [ -n "$target" ] || continue
    [ "$target" = "$room" ] && continue
    used[${library_of[$target]}]=1
    grep -qx "${library_of[$target]}" <<<"$links" ||
      problem "lib/$room includes \"$path\" but its CMakeLists.txt does not link ${library_of[$target]}"
  done < <(grep -ho '^#include "[^"]*"' "${files[@]}" | sed 's/#include "\(.*\)"/\1/' | sort -u)
  for library in $links; do
    [ -n "${used[$library]:-}" ] || problem "lib/$room links $library but includes nothing from it"
  done
  unset used
  count=$(find "lib/$room" -maxdepth 1 -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | wc -l)
  [ "$count" -le 25 ] || problem "lib/$room holds $count source files directly (at most 25: give it sub-rooms)"
done
for dir in $(find lib -mindepth 1 -type d); do
  count=$(find "$dir" -maxdepth 1 -type f \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) | wc -l)
  [ "$count" -le 25 ] || problem "$dir holds $count source files directly (at most 25)"
done

# No cycle among the libraries: repeatedly remove those that link nothing left.
remaining=$(printf '%s\n' "${!edges[@]}" | sort)
while [ -n "$remaining" ]; do
  removed=""
  for library in $remaining; do
    blocked=0
    for dep in ${edges[$library]}; do grep -qx "$dep" <<<"$remaining" && blocked=1; done
    [ $blocked = 0 ] && removed="$removed $library"
  done
  if [ -z "$removed" ]; then
    problem "the library links form a cycle among: $(echo $remaining)"
    break
  fi
  for library in $removed; do remaining=$(grep -vx "$library" <<<"$remaining" || true); done
done

# Programs include only from what they link.
for app_dir in apps/*/; do
  links=$(linked_libraries "$app_dir/CMakeLists.txt")
  while read -r path; do
    [ -n "$path" ] || continue
    target=$(room_of_path "$path")
    [ -n "$target" ] || continue
    grep -qx "${library_of[$target]}" <<<"$links" ||
      problem "$app_dir includes \"$path\" but its CMakeLists.txt does not link ${library_of[$target]}"
  done < <(grep -ho '^#include "[^"]*"' "$app_dir"*.cpp "$app_dir"*.h 2>/dev/null | sed 's/#include "\(.*\)"/\1/' | sort -u)
done

if [ "$failures" -gt 0 ]; then
  echo "architecture_test.sh: $failures problem(s); docs/architecture.md describes the rooms and their arrows" >&2
  exit 1
fi
echo "architecture_test.sh: ${#library_of[@]} libraries, their includes follow their links, no cycle"
