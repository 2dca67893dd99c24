// TEMPORARY: stands in for the trainer, translator and scorer until they land (the lead replaces this file).
#include <spdlog/spdlog.h>

#include "core/app_entry.h"

namespace lseq {

int run_train(const Options&) {
  spdlog::error("lstrain: training is not implemented in this build yet");
  return 2;
}

int run_translate(const Options&) {
  spdlog::error("lstranslate: translation is not implemented in this build yet");
  return 2;
}

int run_score(const Options&) {
  spdlog::error("lsscore: scoring is not implemented in this build yet");
  return 2;
}

}  // namespace lseq
