// TEMPORARY: stands in for the trainer until it lands (the lead replaces this file). lstranslate and lsscore are
// in translate_app.cpp and score_app.cpp.
#include <spdlog/spdlog.h>

#include "core/app_entry.h"

namespace lseq {


}  // namespace lseq
