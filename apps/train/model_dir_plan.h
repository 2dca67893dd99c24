#pragma once
// What lstrain does with its model directory (resume, start afresh, or refuse), decided before anything in it is
// written, and --no-reload's deletions, which happen only once every check of the run has passed.
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "core/cli/options.h"

namespace lseq {

struct NamedPath {
  std::string option;  // "--vocabs"
  std::string path;
};

// The files and folders the options name (--vocabs, --train-sets, --valid-sets, --valid-translation-output, --log,
// --cache-dir): --no-reload never deletes them.
std::vector<NamedPath> paths_named_by_options(const Options& options);

struct ModelDirPlan {
  std::string resume_from;             // the checkpoint to continue from; empty: start from the seed
  std::vector<std::string> to_delete;  // --no-reload: what lstrain made there before, deleted at the start
};

// Without `fresh_start`: resumes from checkpoint/latest; refuses (lseq::Error) a directory whose trained model a
// fresh start would replace: complete checkpoints that no `latest` names, or trained weights without any checkpoint.
// The one exception is the trace of an interrupted first save (a complete checkpoint, no `latest` and no
// model.safetensors yet), which is resumed. With `fresh_start`: starts afresh and plans to delete what lstrain made
// there, except what `keep` names (lseq::Error when such a file lies inside checkpoint/).
ModelDirPlan plan_model_dir(const ModelDir& dir, bool fresh_start, const std::vector<NamedPath>& keep);

// Deletes plan.to_delete, logging one line per file or folder.
void delete_for_fresh_start(const ModelDirPlan& plan);

}  // namespace lseq
