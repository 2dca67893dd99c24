#pragma once
// lstranslate's loop, free of files, vocabularies and models so that tests can run it with a toy StepModel:
// read input windows, decode each batch (beam search or sampling), write one output per input line in input
// order (an empty or rejected input line gives an empty output, or with --n-best one entry with an empty
// translation and scores 0).
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/search/beam_search.h"
#include "core/search/sampling.h"
#include "core/search/step_model.h"
#include "data/translation_input.h"

namespace lseq {

struct TranslateSettings {
  BeamSearchOptions beam;
  bool sample = false;  // --output-sampling given: sampling replaces beam search
  SamplingOptions sampling;
  bool n_best = false;       // --n-best: all hypotheses in Marian's n-best format
  bool word_scores = false;  // --word-scores
  // Beam search with continuous batching (beam_search_continuous) where every decoder can admit sentences: the
  // input's sentences are fed to the decoders as places free up instead of batch by batch.
  bool continuous = false;
};

// Whether translate_all decodes continuously: settings.continuous, beam search, and decoders that can admit.
bool decodes_continuously(const std::vector<StepModel*>& models, const TranslateSettings& settings);

// Ids to text (a SentencePiece vocabulary's decode). Empty: print the ids separated by spaces (--no-spm-decode).
using Detokenizer = std::function<std::string(const std::vector<int32_t>&)>;

std::string ids_to_text(const std::vector<int32_t>& ids);  // "12 7 431"

// What translate_all did: input lines (== output entries written) and the target tokens of the translations
// written (the best hypothesis of each line, eos not counted).
struct TranslationTotals {
  int64_t lines = 0;
  int64_t target_tokens = 0;
  // Outputs whose text held line breaks (a byte-level BPE can decode to '\n'), written with spaces instead so that
  // each input line keeps one output line.
  int64_t line_breaks_replaced = 0;
  // Where the calling thread (the searches) spent its time: searching (the wall clock of each window's searches, on
  // all decoders), waiting for the reader thread's next input window (continuously: decoders with nothing to decode
  // waiting for it); and the decoders' waits for room in the writer thread's queue (summed over decoders, part of
  // the searching).
  double search_seconds = 0, input_wait_seconds = 0, output_wait_seconds = 0;
  // How each decoder made during the translation ran (ExtraDecoders; none when none was made).
  std::vector<StepModel::RunCounts> extra_decoder_runs;
};

// Decoders made during a continuous translation once the input proves long (lstranslate without --decoders): more
// decoders side by side keep a GPU busier through each one's host work, which pays on a long input, while on a short
// one every decoder ends in a tail of a few long outputs and more of them only slowed one another (4 against 6
// decoders on one H200: bench/results/translate-decoders-h200-2026-11-29.txt).
struct ExtraDecoders {
  int count = 0;              // at most this many are made
  int64_t after_batches = 0;  // once the input windows taken so far hold at least this many batches
  // A further decoder (a copy over the same weights, on a backend of its own); called on the thread that will decode
  // with it. A decoder that cannot be made (an error) is left out with a warning: the others go on.
  std::function<std::unique_ptr<StepModel>()> make;
};

// Translates all input. With progress_seconds > 0, logs the lines done, lines/s and target tokens/s every that many
// seconds (lstranslate: unless --quiet-translation).
// The searches, and so every call of `model`, run on the calling thread; input.next (and so its encoder) runs on a
// reader thread, `detokenize` and the writes to `out` on a writer thread. Each is used from its one thread only,
// but the three run at the same time, so they must share no unguarded state (lstranslate's encoder and
// detokenizer are two Vocab objects). The output, totals and any exception are those of running the three one
// after the other: an exception in any thread stops the others and is rethrown here once all have ended.
TranslationTotals translate_all(StepModel& model, data::TranslationInput& input, const Detokenizer& detokenize,
                                const TranslateSettings& settings, std::ostream& out, double progress_seconds = 0);
// The same with several decoders (copies of one model, lstranslate's --decoders): a window's batches go to whichever
// decoder is free, models[0] on the calling thread and each other one on a thread of its own, so that one decoder's
// steps run while another waits on the host. The output is the same as with one decoder (each batch is decoded on
// its own and lines are written in input order); search_seconds is the calling thread's wall clock in the searches.
// Continuously (decodes_continuously), each decoder instead takes the input's sentences a few at a time (window after
// window, in the batches' order, without waiting for a window's searches to end before the next window's start)
// whenever it has room; a sentence's translation does not depend on which decoder or neighbours it had. Then
// `extra` decoders join once the input proves long (see ExtraDecoders), each on a thread of its own.
TranslationTotals translate_all(const std::vector<StepModel*>& models, data::TranslationInput& input,
                                const Detokenizer& detokenize, const TranslateSettings& settings, std::ostream& out,
                                double progress_seconds = 0, const ExtraDecoders& extra = {});

}  // namespace lseq
